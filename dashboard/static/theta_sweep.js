
export default function (component) {
  const { data, setTriggerValue } = component;
  const selector = `.st-key-${data.chart} .js-plotly-plot`;
  const stale = (what, on) => document.querySelectorAll(what).forEach((el) => el.classList.toggle("hsc-stale", on));
  const follow = `.st-key-${data.chart}_follow`, pageSlider = `.st-key-${data.chart}_slider`;
  // This function runs again on every rerun: listeners are attached once per chart element and
  // read the latest server θ and trigger from it, so no stale θ is ever sent back.
  const show = (gd, k) => {
    const sl = gd._fullLayout.sliders[0];
    k = Math.max(0, Math.min(sl.steps.length - 1, k));
    if (window.Plotly && window.Plotly.animate) {
      window.Plotly.animate(gd, [sl.steps[k].value], { mode: "immediate", frame: { duration: 0, redraw: false },
                                                      transition: { duration: 0 } });
    }
  };
  const frameOf = (gd, v) => gd._fullLayout.sliders[0].steps.findIndex((s) => s.value === v);
  const exportImage = (gd, st) => {
    const fmt = (st.image && st.image.format) || "png";
    const title = st.image && st.image.title;
    const head = title ? 72 : 0;  // two title lines: what it is, and which model, data set, TS, θ
    const top = (gd.layout.margin && gd.layout.margin.t) || 0;
    // One font the export measures and draws alike (a web font still loading cut the legend's text).
    const font = Object.assign({}, gd.layout.font, { family: "Arial, Helvetica, sans-serif" });
    const layout = Object.assign({}, gd.layout, { sliders: [], updatemenus: [], font: font,
      margin: Object.assign({}, gd.layout.margin, { t: Math.max(20, top - st.controls) + head }) });
    if (gd.layout.legend) layout.legend = Object.assign({}, gd.layout.legend, { font: Object.assign({},
      gd.layout.legend.font, { family: font.family }) });
    if (title) layout.title = { text: title, x: 0.01, xanchor: "left", y: 0.995, yanchor: "top", yref: "container",
                                pad: { t: 12 }, font: { size: 16, family: font.family } };
    window.Plotly.downloadImage({ data: gd.data, layout: layout }, {
      format: fmt, filename: (st.image && st.image.filename) || "figure", scale: 2,
      width: gd._fullLayout.width, height: gd._fullLayout.height - st.controls + head });
  };
  const attach = (gd) => {
    const st = { timer: null };
    gd.__hscSweep = st;
    // Every frame shown (play, drag, key) restarts the timer: θ is sent once the sweep rests.
    gd.on("plotly_animatingframe", (e) => {
      clearTimeout(st.timer);
      if (e.name === st.fromPage) return;  // following the page's own slider
      if (e.name === st.server && !st.userMoved) return;  // the server's own θ, shown by sync()
      st.userMoved = true;  // a sweep in the browser: sync() leaves the chart alone until it rests
      stale(`${follow}, ${pageSlider}`, true);
      st.timer = setTimeout(() => {
        const v = parseFloat(e.name);
        if (e.name === st.server) { st.userMoved = false; stale(`${follow}, ${pageSlider}`, false); }
        else if (Number.isFinite(v)) st.send(v);
      }, st.delay);
    });
    gd.setAttribute("tabindex", "0");
    gd.setAttribute("aria-label", "θ sweep: arrow keys, Page Up/Down, Home and End move θ");
    gd.addEventListener("keydown", (ev) => {
      const sl = gd._fullLayout && gd._fullLayout.sliders && gd._fullLayout.sliders[0];
      if (!sl) return;
      const k = sl.active, n = sl.steps.length;
      const to = { ArrowRight: k + 1, ArrowUp: k + 1, ArrowLeft: k - 1, ArrowDown: k - 1,
                   PageUp: k + 10, PageDown: k - 10, Home: 0, End: n - 1 }[ev.key];
      if (to === undefined) return;
      ev.preventDefault();
      show(gd, to);
    });
    // The camera button: the figure without Play and its slider, titled (capture phase, before Plotly's own).
    gd.addEventListener("click", (ev) => {
      const btn = ev.target.closest && ev.target.closest(
        '.modebar-btn[data-title^="Download plot"]');
      if (!btn || !gd.contains(btn)) return;
      ev.preventDefault(); ev.stopPropagation();
      exportImage(gd, st);
    }, true);
    return st;
  };
  // The page slider's thumb label changes while it is dragged: the chart follows it at once.
  const watchPageSlider = (gd, st) => {
    const thumb = document.querySelector(`${pageSlider} [data-testid="stSliderThumbValue"]`);
    if (!thumb || thumb === st.thumb) return;
    st.thumb = thumb;
    if (st.thumbObs) st.thumbObs.disconnect();
    st.thumbObs = new MutationObserver(() => {
      const v = parseFloat(thumb.textContent);
      if (!Number.isFinite(v)) return;
      const name = v.toFixed(2), k = frameOf(gd, name);
      if (k < 0 || name === st.server) { stale(follow, false); return; }
      st.fromPage = name;
      stale(follow, true);
      show(gd, k);
    });
    st.thumbObs.observe(thumb, { childList: true, characterData: true, subtree: true });
  };
  // Only the newest call of this function acts (an earlier call's timer may still be running).
  const gens = (window.__hscSweepGen = window.__hscSweepGen || {});
  const gen = (gens[data.chart] = (gens[data.chart] || 0) + 1);
  let poll = null;
  const sync = () => {
    if (gens[data.chart] !== gen) { clearInterval(poll); return false; }
    const gd = document.querySelector(selector);
    if (!gd || typeof gd.on !== "function" || !gd._fullLayout || !gd._fullLayout.sliders) return false;
    const st = gd.__hscSweep || attach(gd);
    st.delay = data.delay;
    st.image = data.image;
    st.controls = data.controls;
    st.send = (v) => setTriggerValue("theta", v);
    if (st.server !== data.theta) {  // the server's θ changed
      st.server = data.theta;
      st.userMoved = false;
      st.fromPage = null;
    }
    watchPageSlider(gd, st);
    // Show the server's frame whenever the chart is not at it and the user is not sweeping: also
    // after Streamlit redraws the (cached) figure at its first θ, or before Plotly was ready.
    const sl = gd._fullLayout.sliders[0];
    const k = frameOf(gd, data.theta);
    if (!st.userMoved && !st.fromPage && k >= 0 && k !== sl.active) show(gd, k);
    if (!st.userMoved && (k === sl.active || k < 0)) stale(`${follow}, ${pageSlider}`, false);
    return true;
  };
  poll = setInterval(sync, 250);
  sync();
  return () => clearInterval(poll);
}
