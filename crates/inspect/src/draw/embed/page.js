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

  // White to dark blue for 0..1.
  function blues(v) {
    return [Math.round(247 - 239 * v), Math.round(251 - 203 * v), Math.round(255 - 148 * v)];
  }

  return { reportError: reportError, sizeCanvas: sizeCanvas, blues: blues };
})();
