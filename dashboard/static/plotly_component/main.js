// The dashboard's one chart renderer: a Plotly figure drawn with plotly.js's basic bundle inside a
// Streamlit custom component (the component protocol by hand: componentReady, render, setFrameHeight,
// setComponentValue). It looks like st.plotly_chart's theme="streamlit" (streamlit_theme.js, its sizes
// scaled with the page's type, which the server sends as `rem`) in Streamlit's own web font (the server
// sends the font files' addresses).
//
// A θ-swept chart (`args.sweep`) is one view that owns its θ: the figure's frames (one per θ of the
// 0.01 grid, named "0.00" … "1.00"; or of another swept value, `sweep.names` and `sweep.label`, such as the
// Monitor's time t), its ▶ Play / ❚❚ button, its θ slider, the keys (←/→ ±0.01,
// Page Up/Down ±0.1, Home/End), the θ-dependent text beside or under the chart, and the share link
// of the view on screen. State flows one way:
// * the server gives the first θ and the data (figure, texts, link); it gives a θ again only with a new
//   `rev` (θ moved by something else: a link, a button), which is taken only while no sweep is going;
// * the view sends θ (`setComponentValue({theta, seq})`) only when a sweep comes to rest (Play ended
//   or paused, the slider released, `delay` ms after the last key); nothing the server sends later moves
//   a sweep in progress, so a late answer can never pull the chart back.
(function () {
  var root = document.getElementById("root");
  var bar = document.getElementById("bar"), play = document.getElementById("play");
  var range = document.getElementById("theta"), readout = document.getElementById("readout");
  var share = document.getElementById("share"), copy = document.getElementById("copy");
  var body = document.getElementById("body"), div = document.getElementById("chart");
  var text = document.getElementById("text");
  var S = {spec: null, sweep: null, names: [], k: 0, playing: false, timer: null, restTimer: null,
           lastSent: null, seq: 0, sentSeq: null, rev: null, drawing: null, sentHeight: 0, fonts: null};

  function send(type, data) {
    window.parent.postMessage(Object.assign({isStreamlitMessage: true, type: type}, data || {}), "*");
  }
  function reportHeight() {
    var h = Math.ceil(root.getBoundingClientRect().height);
    if (h > 0 && h !== S.sentHeight) { S.sentHeight = h; send("streamlit:setFrameHeight", {height: h}); }
  }

  // ------------------------------------------------------------------ the look
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
  // Streamlit's web font (Source Sans), from the addresses the server sends (relative to the app's root).
  function loadFonts(fonts) {
    var key = JSON.stringify(fonts || []);
    if (S.fonts === key) return;
    S.fonts = key;
    var appRoot = new URL("../../", window.location.href);
    var css = (fonts || []).map(function (f) {
      return "@font-face{font-family:\"Source Sans\";font-style:" + (f.italic ? "italic" : "normal") +
        ";font-weight:200 900;font-display:block;src:url(\"" + new URL(f.src, appRoot).href + "\") format(\"woff2\")}";
    });
    if (css.length) {
      var style = document.createElement("style");
      style.textContent = css.join("\n");
      document.head.appendChild(style);
    }
  }

  // ------------------------------------------------------------------ the θ of a swept chart
  function nameAt(k) { return S.names[k]; }
  function indexOf(name) {
    var k = S.names.indexOf(name);
    if (k >= 0) return k;
    var v = parseFloat(name), best = 0;
    S.names.forEach(function (n, j) { if (Math.abs(parseFloat(n) - v) < Math.abs(parseFloat(S.names[best]) - v)) best = j; });
    return best;
  }
  function shareHref(name) {
    var sw = S.sweep;
    if (!sw || !sw.share) return null;
    var url = new URL(sw.share);
    url.searchParams.set(sw.param || "theta", name);
    return url.toString();
  }
  // Show frame k: the chart (its frame), the slider, the readout, the text, the link, data-theta.
  function show(k) {
    k = Math.max(0, Math.min(S.names.length - 1, k));
    S.k = k;
    var name = nameAt(k);
    if (name === undefined) return;
    if (S.drawn && window.Plotly) {
      Plotly.animate(div, [name], {mode: "immediate", frame: {duration: 0, redraw: false},
                                   transition: {duration: 0}});
    }
    range.value = String(k);
    readout.textContent = ((S.sweep && S.sweep.label) || "θ") + " = " + name;
    var texts = S.sweep && S.sweep.texts;
    if (texts && texts[name] !== undefined) text.innerHTML = texts[name];  // HTML escaped by the server
    var href = shareHref(name);
    if (href) share.href = href;
    root.setAttribute("data-theta", name);
  }
  function setPlaying(on) {
    S.playing = on;
    play.textContent = on ? "❚❚ Pause" : "▶ Play";
    play.setAttribute("aria-pressed", on ? "true" : "false");
    root.setAttribute("data-playing", on ? "1" : "0");
  }
  // The sweep is at rest at frame k: say so to the server (once per new θ).
  function sendRest() {
    clearTimeout(S.restTimer);
    S.restTimer = null;
    var name = nameAt(S.k);
    if (name === undefined || name === S.lastSent) return;
    S.lastSent = name;
    // increasing across reloads of this frame too, so the server's acknowledgement names one rest
    S.seq = Math.max(S.seq + 1, Date.now());
    S.sentSeq = S.seq;
    root.setAttribute("data-sent", name);
    send("streamlit:setComponentValue", {value: {theta: name, seq: S.seq}, dataType: "json"});
  }
  function restSoon() {
    clearTimeout(S.restTimer);
    S.restTimer = setTimeout(sendRest, (S.sweep && S.sweep.delay) || 400);
  }
  function stop() {
    if (S.timer !== null) clearInterval(S.timer);
    S.timer = null;
    setPlaying(false);
  }
  function startPlay() {
    clearTimeout(S.restTimer);
    S.restTimer = null;
    if (S.k >= S.names.length - 1) show(0);  // from the start again
    setPlaying(true);
    S.timer = setInterval(function () {
      if (S.k >= S.names.length - 1) { stop(); sendRest(); return; }
      show(S.k + 1);
    }, (S.sweep && S.sweep.frame_ms) || 30);
  }
  // A user's move: stop Play, show frame k, rest after the delay.
  function userMove(k) {
    if (S.playing) stop();
    show(k);
    restSoon();
  }
  play.addEventListener("click", function () {
    if (S.playing) { stop(); sendRest(); } else startPlay();
  });
  range.addEventListener("input", function () {
    if (S.playing) stop();
    show(parseInt(range.value, 10));
    clearTimeout(S.restTimer);
    S.restTimer = null;
  });
  range.addEventListener("change", function () { restSoon(); });
  var KEYS = {ArrowRight: 1, ArrowUp: 1, ArrowLeft: -1, ArrowDown: -1, PageUp: 10, PageDown: -10};
  root.addEventListener("keydown", function (ev) {
    if (!S.sweep || ev.target === copy || ev.target === share || ev.target === play && ev.key === " ") return;
    var n = S.names.length, to;
    if (ev.key === "Home") to = 0;
    else if (ev.key === "End") to = n - 1;
    else if (KEYS[ev.key] !== undefined) to = S.k + KEYS[ev.key];
    else return;
    ev.preventDefault();
    userMove(to);
  });
  copy.addEventListener("click", function () {
    var href = share.href;
    var done = function () { copy.textContent = "Copied"; setTimeout(function () { copy.textContent = "Copy link"; }, 1500); };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(href).then(done, function () { window.prompt("Copy this link:", href); });
    } else window.prompt("Copy this link:", href);
  });

  // The camera button: the figure as on screen, with a title saying what it is (and no θ controls,
  // which are outside the chart).
  function exportImage() {
    var im = (S.sweep && S.sweep.image) || S.image || {};
    var title = im.title, head = title ? 72 : 0, fmt = im.format || "png";
    var font = Object.assign({}, div.layout.font, {family: "Arial, Helvetica, sans-serif"});
    var margin = Object.assign({}, div.layout.margin);
    margin.t = (margin.t || 0) + head;
    var layout = Object.assign({}, div.layout, {font: font, margin: margin});
    if (title) layout.title = {text: title, x: 0.01, xanchor: "left", y: 0.995, yanchor: "top", yref: "container",
                               pad: {t: 12}, font: {size: 16, family: font.family}};
    Plotly.downloadImage({data: div.data, layout: layout}, {format: fmt, filename: im.filename || "figure", scale: 2,
      width: div._fullLayout ? div._fullLayout.width : div.clientWidth,
      height: (div._fullLayout ? div._fullLayout.height : div.clientHeight) + head});
  }

  // ------------------------------------------------------------------ drawing
  function draw(args) {
    var fig = JSON.parse(args.spec), layout = fig.layout || {};
    var template = layout.template || {};
    layout.template = Object.assign({}, template, {layout: merge(template.layout || {}, themeAt(args.rem || 16))});
    // st.plotly_chart sets a figure's title in bold (<b>…</b>), so the component does too.
    if (layout.title !== undefined && layout.title !== null) {
      var title = typeof layout.title === "string" ? {text: layout.title} : layout.title;
      layout.title = Object.assign({}, title, {text: "<b>" + (typeof title.text === "string" ? title.text : "") + "</b>"});
    }
    if (args.sweep) {
      // The θ controls are the view's own (above the chart): Plotly's slider and buttons, kept in the
      // figure for the snapshot page and the HTML report, are not drawn here, nor their room.
      var room = args.sweep.controls || 0;
      delete layout.sliders;
      delete layout.updatemenus;
      layout.margin = Object.assign({}, layout.margin);
      layout.margin.t = Math.max(10, (layout.margin.t || 0) - room);
      if (layout.height) layout.height = Math.max(120, layout.height - room);
    }
    // A figure that sets its own width (the tree) keeps it, or less in a narrower column (st.plotly_chart's
    // width="content"); any other fills its box.
    div.style.maxWidth = layout.width ? layout.width + "px" : "";
    delete layout.width;
    layout.autosize = true;
    var config = Object.assign({responsive: true, displaylogo: false}, args.config || {});
    config.modeBarButtonsToRemove = (config.modeBarButtonsToRemove || []).concat(["toImage"]);
    config.modeBarButtonsToAdd = [{name: "Download plot", title: "Download plot", icon: Plotly.Icons.camera,
                                   click: exportImage}];
    S.drawn = false;
    Plotly.purge(div);
    var ready = !document.fonts ? Promise.resolve() : Promise.race([
      document.fonts.load('16px "Source Sans"').catch(function () { return null; }),
      new Promise(function (done) { setTimeout(done, 1000); })]);
    var drawing = S.drawing = ready.then(function () {
      return Plotly.newPlot(div, fig.data, layout, config);
    }).then(function () {
      return fig.frames && fig.frames.length ? Plotly.addFrames(div, fig.frames) : null;
    }).then(function () {
      if (S.drawing !== drawing) return;  // a newer figure is on its way
      S.drawn = true;
      if (S.sweep) show(S.k);
      root.setAttribute("data-drawn", "1");
      root.setAttribute("data-spec", String((Number(root.getAttribute("data-spec")) || 0) + 1));
      reportHeight();
    });
  }

  // A provisional figure (presenter mode before the browser's size is known: the server redraws it at the
  // screen's size at once) is drawn hidden; it shows when the final one arrives (or after 15 s, for a browser
  // that never reports its size).
  function setProvisional(on) {
    clearTimeout(S.reveal);
    root.style.visibility = on ? "hidden" : "";
    if (on) S.reveal = setTimeout(function () { root.style.visibility = ""; }, 15000);
  }

  function render(args) {
    S.image = args.image || null;
    setProvisional(!!args.provisional);
    loadFonts(args.fonts);
    var sweep = args.sweep || null, first = S.spec === null;
    root.classList.toggle("swept", !!sweep);
    S.sweep = sweep;
    if (sweep) {
      body.className = "body " + (sweep.text_side || "below");
      if (sweep.text_ratio) text.style.flex = "0 0 " + sweep.text_ratio;
      var newNames = (sweep.names || []).slice();
      if (JSON.stringify(newNames) !== JSON.stringify(S.names)) {
        S.names = newNames;
        range.max = String(Math.max(0, S.names.length - 1));
      }
      bar.style.fontSize = (args.rem || 16) + "px";
      range.setAttribute("aria-label", sweep.aria || range.getAttribute("aria-label"));
      text.style.fontSize = (args.rem || 16) + "px";
      share.style.display = copy.style.display = sweep.share ? "" : "none";
      if (first || sweep.rev !== S.rev) {
        // The server's θ: at the start, or moved by something else (a link, a button). Never taken while
        // a sweep is going (Play, a drag, keys not yet at rest) or its rest is not yet acknowledged
        // (`ack`: the last rest the server took): the user's rest says where θ is.
        var busy = S.playing || S.restTimer !== null || (S.sentSeq !== null && sweep.ack !== S.sentSeq);
        if (first || !busy) {
          S.rev = sweep.rev;
          S.lastSent = sweep.theta;
          show(indexOf(sweep.theta));
        }
      } else show(S.k);  // new texts or link for the same θ
    }
    if (args.spec !== S.spec) {
      S.spec = args.spec;
      draw(args);
    }
    reportHeight();
  }

  window.addEventListener("message", function (event) {
    var msg = event.data;
    if (msg && msg.type === "streamlit:render") render(msg.args || {});
  });
  if (window.ResizeObserver) new ResizeObserver(reportHeight).observe(root);
  send("streamlit:componentReady", {apiVersion: 1});
})();
