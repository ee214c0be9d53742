// The θ sweep of a Plotly chart and the page's θ slider: one θ, owned by whoever the user moved last.
//
// * The chart owns θ from the moment the user moves it (▶ Play, its slider, a key) until the server
//   has the θ where it came to rest: meanwhile the page's θ slider and θ text are hidden ("ahead"),
//   the rest is sent once (after the animation ends and no frame came for `delay` ms), and nothing
//   the server sends meanwhile (an echo of an earlier rest, a rerun) moves the chart.
// * Otherwise the page owns θ: the chart shows the page slider's thumb (while it is dragged or keyed,
//   before the server has the value) or else the server's θ, checked every 250 ms against both the
//   chart's data and its slider, so a redraw of the chart at its first θ is corrected too; a thumb
//   the server still has not heard of after 2 s is sent through this listener.
// * A θ sent again and again with no answer from an idle server for `STALL_MS` (Streamlit's frontend,
//   under load, can stop sending a tab's widget changes until it is reloaded; docs/guide/snapshots.md)
//   reloads the page at that θ: the link carries every setting, so nothing is lost.
const STALL_MS = 9000;
export default function (component) {
  const { data, setTriggerValue } = component;
  // The chart: in the page, or in the basic-bundle component's iframe (same origin; dashboard/plotly_component.py).
  const findChart = () => {
    const host = document.querySelector(`.st-key-${data.chart}`);
    const gd = host && host.querySelector(".js-plotly-plot");
    if (gd || !host) return gd;
    const frame = host.querySelector("iframe");
    try { return frame && frame.contentDocument ? frame.contentDocument.querySelector(".js-plotly-plot") : null; }
    catch (e) { return null; }
  };
  // The Plotly that drew the chart (the iframe's own, for the component).
  const plotlyOf = (gd) => (gd.ownerDocument.defaultView && gd.ownerDocument.defaultView.Plotly) || window.Plotly;
  const follow = `.st-key-${data.chart}_follow`, pageSlider = `.st-key-${data.chart}_slider`;
  const hide = (what, on) => document.querySelectorAll(what).forEach((el) => el.classList.toggle("hsc-stale", on));
  const slider = (gd) => gd._fullLayout.sliders[0];
  const frameOf = (gd, v) => slider(gd).steps.findIndex((s) => s.value === v);
  const activeValue = (gd) => { const sl = slider(gd); return sl.steps[sl.active] ? sl.steps[sl.active].value : null; };
  const playing = (gd) => !!(gd._transitionData && gd._transitionData._animationRaf);
  // Whether Streamlit says a script run is going (then a slow answer is not a lost one).
  const running = () => Array.from(document.querySelectorAll('[data-testid="stStatusWidget"]'))
    .some((el) => /Running|Stop/.test(el.textContent));
  // Whether the chart's traces hold frame `name`'s data (only the keys the frame sets).
  const sameData = (want, have) => {
    if (want && typeof want === "object" && !Array.isArray(want)) {
      return !!have && typeof have === "object" && Object.keys(want).every((k) => sameData(want[k], have[k]));
    }
    return JSON.stringify(want) === JSON.stringify(have);
  };
  const showsData = (gd, name) => {
    const frames = (gd._transitionData && gd._transitionData._frameHash) || {};
    const f = frames[name];
    if (!f || !f.data) return true;  // nothing to compare with
    const idx = f.traces || f.data.map((_, j) => j);
    return f.data.every((d, j) => sameData(d, gd.data[idx[j]]));
  };
  const animate = (gd, k) => {
    const sl = slider(gd);
    k = Math.max(0, Math.min(sl.steps.length - 1, k));
    const Plotly = plotlyOf(gd);
    if (Plotly && Plotly.animate) {
      Plotly.animate(gd, [sl.steps[k].value], { mode: "immediate", frame: { duration: 0, redraw: false },
                                                      transition: { duration: 0 } });
    }
  };
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
    plotlyOf(gd).downloadImage({ data: gd.data, layout: layout }, {
      format: fmt, filename: (st.image && st.image.filename) || "figure", scale: 2,
      width: gd._fullLayout.width, height: gd._fullLayout.height - st.controls + head });
  };
  // The page slider's θ: its thumb's label (it moves with a drag or a key before the server hears of it).
  const thumbValue = (gd) => {
    const thumb = document.querySelector(`${pageSlider} [data-testid="stSliderThumbValue"]`);
    if (!thumb) return null;
    const v = parseFloat(thumb.textContent);
    if (!Number.isFinite(v)) return null;
    const name = v.toFixed(2);
    return frameOf(gd, name) >= 0 ? name : null;
  };

  const attach = (gd) => {
    // ahead: the user moved the chart and the server has not its θ yet; want: where it rests;
    // mine: the frame this listener itself asked for (not the user's).
    const st = { timer: null, ahead: false, want: null, sentAt: 0, mine: null, thumbSeen: null, thumbSince: 0 };
    gd.__hscSweep = st;
    st.show = (k) => {  // the page's θ, shown by this listener
      st.mine = slider(gd).steps[Math.max(0, Math.min(slider(gd).steps.length - 1, k))].value;
      animate(gd, k);
    };
    st.sendRest = () => {
      st.sentAt = Date.now();
      st.send(parseFloat(st.want));
    };
    // A value sent (`v`, two decimals) that the server has not answered: since when it waits. After
    // STALL_MS with Streamlit idle, the page is reloaded at `v` (only where the link names θ).
    st.waiting = (v) => {
      const now = Date.now();
      if (st.unanswered !== v) { st.unanswered = v; st.unansweredSince = now; return; }  // a new value: start the clock
      if (st.link && !st.reloading && !running() && now - st.unansweredSince > STALL_MS) {
        st.reloading = true;
        const url = new URL(window.location.href);
        url.searchParams.set(st.link, v);
        window.location.replace(url.toString());
      }
    };
    const rest = () => {
      st.timer = null;
      if (playing(gd)) { st.timer = setTimeout(rest, st.delay); return; }  // ▶ Play still running
      st.want = activeValue(gd);
      if (st.want === null) return;
      if (st.want === st.server) { st.ahead = false; st.want = null; st.refresh(); }
      else st.sendRest();
    };
    gd.on("plotly_animatingframe", (e) => {
      if (st.mine !== null && e.name === st.mine) { st.mine = null; return; }
      st.mine = null;
      st.ahead = true;  // the user moves the chart: it owns θ until the server has where it rests
      st.want = null;
      clearTimeout(st.timer);
      st.timer = setTimeout(rest, st.delay);
      st.refresh();
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
      st.mine = null;
      animate(gd, to);  // a user frame
    });
    // The camera button: the figure without Play and its slider, titled (capture phase, before Plotly's own).
    gd.addEventListener("click", (ev) => {
      const btn = ev.target.closest && ev.target.closest('.modebar-btn[data-title^="Download plot"]');
      if (!btn || !gd.contains(btn)) return;
      ev.preventDefault(); ev.stopPropagation();
      exportImage(gd, st);
    }, true);
    // Reconcile the chart, the page slider and the server (every 250 ms and on each server update).
    st.refresh = () => {
      if (!gd._fullLayout || !gd._fullLayout.sliders) return;
      const resting = st.timer === null && !playing(gd);
      if (st.ahead && resting && st.want !== null) {
        if (st.want === st.server) { st.ahead = false; st.want = null; }
        else if (activeValue(gd) !== st.want || !showsData(gd, st.want)) st.show(frameOf(gd, st.want));  // redrawn
        else if (Date.now() - st.sentAt > 3000) st.sendRest();  // the rerun was lost: say it again
      }
      let target = null, pending = null;  // pending: a θ sent that the server has not answered
      if (st.ahead && resting && st.want !== null && st.want !== st.server && st.sentAt) pending = st.want;
      if (!st.ahead) {
        const thumb = thumbValue(gd), now = Date.now();
        if (thumb !== st.thumbSeen) { st.thumbSeen = thumb; st.thumbSince = now; }
        // A page slider that shows another θ than the server's for 2 s lost its last change on the
        // way (quick keys during a rerun): send it again, so page, chart and server end at one θ.
        if (thumb !== null && thumb !== st.server && now - st.thumbSince > 2000 && now - st.sentAt > 2000) {
          st.sentAt = now;
          st.send(parseFloat(thumb));
        }
        if (thumb !== null && thumb !== st.server && now - st.thumbSince > 2000) pending = thumb;
        // The link's θ (st.link names its parameter) behind the server's for 2 s: a rerun's new link
        // was overtaken by an older one; one more rerun at the server's θ writes it again.
        const linked = st.link && new URLSearchParams(window.location.search).get(st.link);
        const linkBehind = linked !== null && linked !== undefined && Number.isFinite(parseFloat(linked))
          && parseFloat(linked).toFixed(2) !== st.server;
        if (linkBehind !== st.linkBehind) { st.linkBehind = linkBehind; st.linkSince = now; }
        if ((thumb === null || thumb === st.server) && linkBehind && !playing(gd) && now - st.linkSince > 2000
            && now - st.sentAt > 2000) {
          st.sentAt = now;
          st.send(parseFloat(st.server));
        }
        target = thumb || st.server;
        const k = frameOf(gd, target);
        if (k >= 0 && !playing(gd) && (activeValue(gd) !== target || !showsData(gd, target))) {
          if (showsData(gd, target) && plotlyOf(gd)) plotlyOf(gd).relayout(gd, { "sliders[0].active": k });
          else st.show(k);
        }
      }
      if (pending === null) st.unanswered = null;
      else st.waiting(pending);
      hide(pageSlider, st.ahead);
      hide(follow, st.ahead || (target !== null && target !== st.server));
    };
    return st;
  };

  // Only the newest call of this function acts (it runs again on every rerun with the server's θ).
  const gens = (window.__hscSweepGen = window.__hscSweepGen || {});
  const gen = (gens[data.chart] = (gens[data.chart] || 0) + 1);
  let poll = null;
  const sync = () => {
    if (gens[data.chart] !== gen) { clearInterval(poll); return false; }
    const gd = findChart();
    if (!gd || typeof gd.on !== "function" || !gd._fullLayout || !gd._fullLayout.sliders) return false;
    const st = gd.__hscSweep || attach(gd);
    st.delay = data.delay;
    st.image = data.image;
    st.controls = data.controls;
    st.send = (v) => setTriggerValue("theta", v);
    st.link = data.link || null;
    if (st.gen !== gen) { st.gen = gen; st.unanswered = null; }  // the server answered: the clock starts anew
    st.server = data.theta;
    // The page slider's thumb label changes while it is dragged: the chart follows at once (not at the next poll).
    const thumb = document.querySelector(`${pageSlider} [data-testid="stSliderThumbValue"]`);
    if (thumb && thumb !== st.thumbEl) {
      if (st.thumbObs) st.thumbObs.disconnect();
      st.thumbEl = thumb;
      st.thumbObs = new MutationObserver(() => st.refresh());
      st.thumbObs.observe(thumb, { childList: true, characterData: true, subtree: true });
    }
    st.refresh();
    return true;
  };
  poll = setInterval(sync, 250);
  sync();
  return () => clearInterval(poll);
}
