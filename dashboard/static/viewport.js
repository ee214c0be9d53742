
export default function (component) {
  const { data, setStateValue } = component;
  const report = () => {
    const v = `${window.innerWidth}x${window.innerHeight}`;
    if (v !== data.known) setStateValue("size", v);
  };
  let timer = null;
  const onResize = () => { clearTimeout(timer); timer = setTimeout(report, 300); };
  window.addEventListener("resize", onResize);
  report();
  return () => { clearTimeout(timer); window.removeEventListener("resize", onResize); };
}
