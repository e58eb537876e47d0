// The stats page's charts, drawn with Chart.js from the JSON the server embedded.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("stats-data").textContent);
  var colors = { succeeded: "#1f8a4c", failed: "#c23434", cancelled: "#9aa0ad" };
  Chart.defaults.font.family = "system-ui, sans-serif";
  Chart.defaults.animation = false;  // screenshots and slow machines see the final chart

  function outcomes(id, groups) {
    var labels = Object.keys(groups);
    new Chart(document.getElementById(id), {
      type: "bar",
      data: {
        labels: labels,
        datasets: data.statuses.map(function (s) {
          return { label: s, backgroundColor: colors[s],
                   data: labels.map(function (k) { return groups[k][s]; }) };
        }),
      },
      options: { responsive: true, maintainAspectRatio: false, indexAxis: labels.length > 6 ? "y" : "x",
                 scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true } } },
    });
  }

  outcomes("chart-departments", data.departments);
  outcomes("chart-tools", data.tools);
  var labels = Object.keys(data.durations);
  new Chart(document.getElementById("chart-durations"), {
    type: "bar",
    data: {
      labels: labels,
      datasets: [
        { label: "median", backgroundColor: "#2f5bd3", data: labels.map(function (k) { return data.durations[k].median; }) },
        { label: "p95", backgroundColor: "#a9bbef", data: labels.map(function (k) { return data.durations[k].p95; }) },
      ],
    },
    // Log scale: one slow tool (a 40 s report) must not flatten every 0.3 s lookup to nothing.
    options: { responsive: true, maintainAspectRatio: false,
               scales: { y: { type: "logarithmic", title: { display: true, text: "seconds" } } } },
  });
})();
