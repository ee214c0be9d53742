// A Plotly figure drawn with plotly.js's basic bundle (scatter, bar, pie) inside a Streamlit
// custom component: the Streamlit component protocol by hand (componentReady, render,
// setFrameHeight), no component library.
(function () {
  var div = document.getElementById("chart"), shown = null;
  function send(type, data) {
    window.parent.postMessage(Object.assign({isStreamlitMessage: true, type: type}, data || {}), "*");
  }
  window.addEventListener("message", function (event) {
    var msg = event.data;
    if (!msg || msg.type !== "streamlit:render" || msg.args.spec === shown) return;
    shown = msg.args.spec;
    var fig = JSON.parse(shown);
    Plotly.purge(div);
    var config = Object.assign({responsive: true}, msg.args.config || {});
    Plotly.newPlot(div, fig.data, fig.layout, config).then(function () {
      return fig.frames && fig.frames.length ? Plotly.addFrames(div, fig.frames) : null;
    }).then(function () {
      send("streamlit:setFrameHeight", {height: div.offsetHeight || fig.layout.height || 450});
    });
  });
  send("streamlit:componentReady", {apiVersion: 1});
})();
