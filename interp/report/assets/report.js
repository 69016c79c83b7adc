// A report page: the raw results, embedded as JSON, are shown pretty-printed when their panel is opened.
(function () {
  "use strict";
  const { byId } = window.interpDom;
  const details = byId("results-details");
  const data = byId("interp-results");
  const out = byId("results-json");
  if (!details || !data || !out) { return; }
  details.addEventListener("toggle", () => {
    if (details.open && !out.textContent) {
      out.textContent = JSON.stringify(JSON.parse(data.textContent), null, 2);
    }
  });
})();
