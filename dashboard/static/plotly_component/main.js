// A Plotly figure drawn with plotly.js's basic bundle (scatter, bar, pie) inside a Streamlit
// custom component: the Streamlit component protocol by hand (componentReady, render,
// setFrameHeight), no component library. It looks like st.plotly_chart's theme="streamlit":
// Streamlit's chart theme (streamlit_theme.js, its sizes scaled with the page's root font, so
// presenter mode's bigger type reaches the chart too) and the page's own web fonts.
(function () {
  var div = document.getElementById("chart"), shown = null, sentHeight = 0;
  function send(type, data) {
    window.parent.postMessage(Object.assign({isStreamlitMessage: true, type: type}, data || {}), "*");
  }
  // The page's root font size (px): 16 normally, larger in presenter mode (presenter.css).
  function pageRem() {
    try {
      return parseFloat(window.parent.getComputedStyle(window.parent.document.documentElement).fontSize) || 16;
    } catch (e) { return 16; }
  }
  // The theme's lengths that Streamlit gives in rem (font sizes, paddings, title standoffs).
  var REM_PATHS = ["font.size", "legend.title.font.size", "legend.font.size", "coloraxis.colorbar.tickfont.size",
    "coloraxis.colorbar.xpad", "coloraxis.colorbar.title.font.size", "title.pad.l", "title.font.size",
    "ternary.aaxis.tickfont.size", "ternary.baxis.tickfont.size", "ternary.caxis.tickfont.size",
    "ternary.title.font.size", "margin.pad", "hoverlabel.font.size", "xaxis.tickfont.size", "xaxis.title.font.size",
    "xaxis.title.standoff", "yaxis.tickfont.size", "yaxis.title.font.size", "yaxis.title.standoff"];
  function themeAt(rem) {
    var t = JSON.parse(JSON.stringify(window.HSC_STREAMLIT_THEME || {}));
    REM_PATHS.forEach(function (path) {
      var keys = path.split("."), o = t;
      for (var i = 0; i < keys.length - 1 && o; i++) o = o[keys[i]];
      var last = keys[keys.length - 1];
      if (o && typeof o[last] === "number") o[last] = o[last] * rem / 16;
    });
    return t;
  }
  function merge(base, over) {  // over wins (Streamlit's theme over the figure's own template)
    var out = Object.assign({}, base);
    Object.keys(over).forEach(function (k) {
      var a = base ? base[k] : undefined, b = over[k];
      out[k] = a && b && typeof a === "object" && typeof b === "object" && !Array.isArray(a) && !Array.isArray(b)
        ? merge(a, b) : b;
    });
    return out;
  }
  // The page's @font-face rules (Source Sans…), their URLs made absolute, so the chart's text is set in
  // the page's type (same origin); once, before the first draw.
  var fontsCopied = false;
  function copyFonts() {
    if (fontsCopied) return;
    fontsCopied = true;
    var css = [];
    try {
      Array.prototype.forEach.call(window.parent.document.styleSheets, function (sheet) {
        var rules;
        try { rules = sheet.cssRules; } catch (e) { return; }
        Array.prototype.forEach.call(rules || [], function (rule) {
          if (rule.type !== 5) return;  // CSSFontFaceRule
          var base = sheet.href || window.parent.location.href;
          css.push(rule.cssText.replace(/url\((['"]?)([^'")]+)\1\)/g, function (m, q, u) {
            return "url(\"" + new URL(u, base).href + "\")";
          }));
        });
      });
    } catch (e) { /* not same origin: Plotly's fallback fonts */ }
    if (css.length) {
      var style = document.createElement("style");
      style.textContent = css.join("\n");
      document.head.appendChild(style);
    }
  }
  function reportHeight() {
    var h = Math.ceil(div.getBoundingClientRect().height);
    if (h > 0 && h !== sentHeight) { sentHeight = h; send("streamlit:setFrameHeight", {height: h}); }
  }
  window.addEventListener("message", function (event) {
    var msg = event.data;
    if (!msg || msg.type !== "streamlit:render" || msg.args.spec === shown) return;
    shown = msg.args.spec;
    copyFonts();
    var fig = JSON.parse(shown), layout = fig.layout || {};
    var template = layout.template || {};
    layout.template = Object.assign({}, template, {layout: merge(template.layout || {}, themeAt(pageRem()))});
    // st.plotly_chart sets a figure's title in bold (<b>…</b>), so the component does too.
    if (layout.title !== undefined && layout.title !== null) {
      var title = typeof layout.title === "string" ? {text: layout.title} : layout.title;
      layout.title = Object.assign({}, title, {text: "<b>" + (typeof title.text === "string" ? title.text : "") + "</b>"});
    }
    // A figure that sets its own width (the tree) keeps it, or less in a narrower column (st.plotly_chart's
    // width="content"); any other fills the column. The frame's width follows the column (responsive).
    div.style.maxWidth = layout.width ? layout.width + "px" : "";
    delete layout.width;
    layout.autosize = true;
    Plotly.purge(div);
    var config = Object.assign({responsive: true}, msg.args.config || {});
    // The page's type is in the browser's cache: load it before Plotly measures the text (at most 1 s).
    var ready = !document.fonts ? Promise.resolve() : Promise.race([
      document.fonts.load('16px "Source Sans"').catch(function () { return null; }),
      new Promise(function (done) { setTimeout(done, 1000); })]);
    ready.then(function () {
      return Plotly.newPlot(div, fig.data, layout, config);
    }).then(function () {
      return fig.frames && fig.frames.length ? Plotly.addFrames(div, fig.frames) : null;
    }).then(function () {
      div.on("plotly_afterplot", reportHeight);
      reportHeight();
    });
  });
  if (window.ResizeObserver) new ResizeObserver(reportHeight).observe(div);
  send("streamlit:componentReady", {apiVersion: 1});
})();
