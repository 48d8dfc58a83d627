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

  // Signed values, -1..1 (clamped): white at 0, blue above (restores, gains, B higher than A),
  // red below; ColorBrewer's RdBu ends, as the report's figures (figures/canvas.rs's
  // ColourScale::Signed). One convention for every page: the book's Colours page.
  var SIGNED_POSITIVE = [33, 102, 172];
  var SIGNED_NEGATIVE = [178, 24, 43];
  function signedRgb(v) {
    var t = Math.min(1, Math.abs(v));
    var end = v >= 0 ? SIGNED_POSITIVE : SIGNED_NEGATIVE;
    return end.map(function (c) { return Math.round(255 + (c - 255) * t); });
  }

  // A colour bar in `element`: the scale `colour` (a function of 0..1 to [r, g, b]) drawn
  // left to right, its two ends and middle labelled, and the unit after it. The element's
  // data-min, data-max and data-unit say what it shows, for tests.
  function colourBar(element, colour, range, unit) {
    element.textContent = '';
    element.className = 'colour-bar';
    var canvas = document.createElement('canvas');
    var width = 160;
    var context = sizeCanvas(canvas, width, 12);
    for (var x = 0; x < width; x++) {
      var rgb = colour(x / (width - 1));
      context.fillStyle = 'rgb(' + rgb[0] + ',' + rgb[1] + ',' + rgb[2] + ')';
      context.fillRect(x, 0, 1, 12);
    }
    var label = function (value) {
      var span = document.createElement('span');
      span.textContent = String(Number(value.toFixed(3)));
      return span;
    };
    element.appendChild(label(range[0]));
    element.appendChild(canvas);
    element.appendChild(label(range[1]));
    var text = document.createElement('span');
    text.className = 'unit';
    text.textContent = unit + ' (middle ' + Number(((range[0] + range[1]) / 2).toFixed(3)) + ')';
    element.appendChild(text);
    element.setAttribute('data-min', String(range[0]));
    element.setAttribute('data-max', String(range[1]));
    element.setAttribute('data-unit', unit);
    // Its colours at the low end, the middle and the high end, for tests and scripts.
    element.setAttribute('data-low-rgb', colour(0).join(','));
    element.setAttribute('data-mid-rgb', colour(0.5).join(','));
    element.setAttribute('data-high-rgb', colour(1).join(','));
  }

  return { reportError: reportError, sizeCanvas: sizeCanvas, viridis: viridis,
    signedRgb: signedRgb, colourBar: colourBar };
})();
