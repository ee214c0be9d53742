// Presenter mode: a Plotly chart is not shown while it is drawn wider than its box.
//
// Streamlit mounts a new chart element whenever a figure changes (the element's id hashes the figure),
// and its first draw of a chart sized by the figure ("content" width) uses the column's whole width; a
// frame later it redraws at the figure's own width. On a presenter link that rerun comes right after the
// browser reports its size, so the Explorer tree flashed at 1830 px, cropped, before its 1480 px. Such a
// draw is hidden (class hsc-oversized, presenter.css) until the chart fits its box. The
// MutationObserver's callback runs before the browser paints, so the wide draw never reaches the screen.
// A chart that stays wider than its box (a figure wider than its column) is shown after GRACE ms.
const GRACE = 1000;

export default function () {
  const since = new WeakMap();  // chart → when it was first seen drawn wider than its box
  let timer = null;
  const check = () => {
    const now = performance.now();
    for (const gd of document.querySelectorAll(".js-plotly-plot")) {
      const svg = gd.querySelector(".main-svg");
      const drawn = svg ? parseFloat(svg.getAttribute("width")) : NaN;
      const box = gd.clientWidth;
      const wide = Number.isFinite(drawn) && box > 0 && drawn > box + 1;
      if (!wide) since.delete(gd);
      else if (!since.has(gd)) {
        since.set(gd, now);
        clearTimeout(timer);
        timer = setTimeout(check, GRACE + 50);
      }
      // toggling to the state it already has changes nothing (no new mutation record, no loop)
      gd.classList.toggle("hsc-oversized", wide && now - since.get(gd) < GRACE);
    }
  };
  const observer = new MutationObserver(check);
  observer.observe(document.body, { subtree: true, childList: true, attributes: true,
                                    attributeFilter: ["width", "style"] });
  check();
  return () => { observer.disconnect(); clearTimeout(timer); };
}
