(function () {
  "use strict";
  var details = document.getElementById("results-details");
  var data = document.getElementById("interp-results");
  var out = document.getElementById("results-json");
  if (!details || !data || !out) { return; }
  details.addEventListener("toggle", function () {
    if (details.open && !out.textContent) {
      out.textContent = JSON.stringify(JSON.parse(data.textContent), null, 2);
    }
  });
})();
