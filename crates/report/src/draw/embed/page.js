// page.js: what explore.html and compare.html share, in a script of its own before each
// page's: the error hooks the tests read (every script error is appended to the body's
// data-errors attribute), canvases drawn at the screen's resolution, the colour scale.
var headlabPage = (function () {
  'use strict';

  var errors = [];
  function reportError(message) {
    errors.push(String(message));
    document.body.setAttribute('data-errors', errors.join(' | '));
  }
  window.onerror = function (message, source, line, column) {
    reportError(message + ' (line ' + line + ':' + column + ')');
  };
  window.addEventListener('unhandledrejection', function (event) {
    reportError('unhandled rejection: ' + event.reason);
  });

  // A canvas sized in CSS pixels and drawn at the screen's resolution.
  function sizeCanvas(canvas, width, height) {
    var ratio = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    canvas.style.width = width + 'px';
    canvas.style.height = height + 'px';
    var context = canvas.getContext('2d');
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    return context;
  }

  // Viridis for 0..1 (dark purple to yellow: brighter is more), the scale of the report's
  // figures (plotters' ViridisRGB, the same stops, linearly between them).
  var VIRIDIS = [[68, 1, 84], [70, 50, 127], [54, 92, 141], [39, 127, 143], [31, 162, 136],
    [74, 194, 110], [160, 219, 57], [254, 232, 37]];
  function viridis(v) {
    var t = Math.min(1, Math.max(0, v)) * (VIRIDIS.length - 1);
    var i = Math.min(VIRIDIS.length - 2, Math.floor(t));
    var f = t - i;
    return [0, 1, 2].map(function (c) {
      return Math.round(VIRIDIS[i][c] + f * (VIRIDIS[i + 1][c] - VIRIDIS[i][c]));
    });
  }

  return { reportError: reportError, sizeCanvas: sizeCanvas, viridis: viridis };
})();
