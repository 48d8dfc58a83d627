// compare.js: the interactive views of compare.html (matched heads, slot view, diff view),
// drawn on canvases from the JSON in <script id="data"> (see
// crates/report/src/draw/compare_page.rs for its format). Vanilla JS, no network.
//
// For automated checks the page publishes its state as attributes:
// - <body data-ready="ok"> once the first views are drawn (or "error: ..."), and
//   data-errors="..." for any script error (window.onerror);
// - grid cells are canvases of class "cell" with data-layer, data-slot and data-run;
// - #slot-view has data-layer, data-slot, data-sequence, data-runs (panels drawn) and
//   data-hover ("none" or the hovered query);
// - #diff-table has data-a, data-b (run indices) and data-rows; #diff-canvas has data-slot
//   ("none" until a row is picked) and data-layer;
// - the colour bars #grid-colour-bar and #diff-colour-bar (once a row is picked) have
//   data-min, data-max and data-unit;
// - window.headlabCompare = { data, select(layer, slot, sequence), pair(a, b), hover(query),
//   diff(layer, slot) } drives the views through the same code as the mouse.
(function () {
  'use strict';

  // Shared with the other page (embed/page.js, loaded first).
  var reportError = headlabPage.reportError;
  var sizeCanvas = headlabPage.sizeCanvas;
  var viridis = headlabPage.viridis;
  var colourBar = headlabPage.colourBar;

  // Token labels are drawn beside a heatmap only while a row is at least this many pixels
  // tall; longer sequences get position ticks, and the hovered token is named in the title.
  var MIN_LABEL_ROW = 8;

  var data;
  // What is shown: probe sequence (index into data.sequences), layer and slot of the grid and
  // slot view, the hovered query of the slot view (null: none), the diff view's runs a and b
  // and its picked row ({layer, slot} or null).
  var state = { sequence: 0, layer: 0, slot: 0, hover: null, a: 0, b: 0, diff: null };
  // The slot view's panels, for hit-testing and redrawing on hover: {canvas, source, box}.
  var panels = [];

  function $(id) { return document.getElementById(id); }

  // -1..1 to red, white, blue (B lower, equal, B higher): the pages' one convention for
  // signed values (embed/page.js).
  var diverging = headlabPage.signedRgb;

  // An n x n offscreen canvas, one pixel per query/key pair coloured by colour(i), scaled up
  // later without smoothing (so 256 tokens cost 65536 pixels, not a path per cell).
  function pixels(n, colour) {
    var source = document.createElement('canvas');
    source.width = n;
    source.height = n;
    var context = source.getContext('2d');
    var image = context.createImageData(n, n);
    for (var i = 0; i < n * n; i++) {
      var rgb = colour(i);
      image.data[4 * i] = rgb[0];
      image.data[4 * i + 1] = rgb[1];
      image.data[4 * i + 2] = rgb[2];
      image.data[4 * i + 3] = 255;
    }
    context.putImageData(image, 0, 0);
    return source;
  }

  function patternPixels(values, n) {
    return pixels(n, function (i) { return viridis(values[i] / 1000); });
  }

  function format(value) {
    if (value === null || value === undefined) { return '\u2013'; }
    return Number.isInteger(value) ? String(value) : value.toFixed(3);
  }

  // A fraction in points (the runs table's header says so), a dash where not measured.
  function points(value) {
    return value === null || value === undefined ? '\u2013' : (100 * value).toFixed(2);
  }

  // "entropy (nats)", "mean distance (positions)", "task target (fraction)",
  // "previous_token (fraction)" (pattern scores by their name): measure `index` of
  // data.measures with its unit (data.units, from Rust).
  function measureLabel(index) {
    var name = data.measures[index];
    var label = name.indexOf('pattern_scores.') === 0 ? name.slice('pattern_scores.'.length)
      : name === 'task_target_score' ? 'task target' : name.replace(/_/g, ' ');
    var unit = data.units[index];
    return unit ? label + ' (' + unit + ')' : label;
  }

  function slot(layer, index) { return data.layers[layer][index]; }

  function checkLayerSlot(layer, index) {
    if (!(layer >= 0 && layer < data.n_layers)) { throw new Error('no layer ' + layer); }
    if (!(index >= 0 && index < data.n_heads)) { throw new Error('no slot ' + index); }
  }

  function checkRun(run) {
    if (!(run >= 0 && run < data.runs.length)) { throw new Error('no run ' + run); }
  }

  // ---- a heatmap with token labels -------------------------------------------------------

  // Draws `source` (n x n) as a size x size heatmap on `canvas`, queries down and keys
  // across, with token labels when they fit; dims every row but `hover` when one is given.
  // Returns where the heatmap lies, for hit-testing.
  function drawHeatmap(canvas, source, tokens, size, hover) {
    var n = tokens.length;
    var cell = size / n;
    var labels = cell >= MIN_LABEL_ROW;
    var margin = labels ? Math.min(90, 10 + 6.5 * longest(tokens)) : 8;
    var width = margin + size + 4;
    var height = margin + size + 4;
    var context = sizeCanvas(canvas, width, height);
    context.fillStyle = '#fff';
    context.fillRect(0, 0, width, height);
    context.imageSmoothingEnabled = false;
    context.drawImage(source, margin, margin, size, size);
    if (hover !== null && hover !== undefined) {
      context.fillStyle = 'rgba(255,255,255,0.6)';
      context.fillRect(margin, margin, size, hover * cell);
      context.fillRect(margin, margin + (hover + 1) * cell, size, (n - hover - 1) * cell);
      context.strokeStyle = '#d62728';
      context.lineWidth = 2;
      context.strokeRect(margin, margin + hover * cell, size, cell);
    }
    context.fillStyle = '#333';
    if (labels) {
      context.font = Math.min(12, Math.floor(cell) - 1) + 'px system-ui, sans-serif';
      context.textBaseline = 'middle';
      for (var i = 0; i < n; i++) {
        var label = tokens[i].length > 12 ? tokens[i].slice(0, 11) + '\u2026' : tokens[i];
        context.fillStyle = i === hover ? '#d62728' : '#333';
        context.textAlign = 'right';
        context.fillText(label, margin - 4, margin + (i + 0.5) * cell);
        // Keys along the top, written upwards.
        context.save();
        context.translate(margin + (i + 0.5) * cell, margin - 4);
        context.rotate(-Math.PI / 2);
        context.textAlign = 'left';
        context.fillStyle = '#333';
        context.fillText(label, 0, 0);
        context.restore();
      }
    } else {
      context.font = '10px system-ui, sans-serif';
      context.fillText('queries \u2193  keys \u2192', 2, 6);
    }
    return { left: margin, top: margin, size: size, cell: cell, n: n };
  }

  function longest(tokens) {
    return tokens.reduce(function (m, t) { return Math.max(m, Math.min(12, t.length)); }, 1);
  }

  // ---- runs and controls -----------------------------------------------------------------

  // A matched head as the grid shows it: `H3` in the slot's own layer, `L5H3` in another
  // (models of different grids are matched across layers).
  function headName(matched) {
    return (matched.layer === state.layer ? '' : 'L' + matched.layer) + 'H' + matched.head;
  }

  function runName(r) {
    var run = data.runs[r];
    return run.name + (r === 0 ? ' (reference)' : '');
  }

  function buildRuns() {
    var table = document.createElement('table');
    var head = table.createTHead().insertRow();
    ['#', 'run', 'seed', 'eval token acc (points)'].forEach(function (text) {
      var th = document.createElement('th');
      th.textContent = text;
      head.appendChild(th);
    });
    var body = table.createTBody();
    data.runs.forEach(function (run, r) {
      var row = body.insertRow();
      row.insertCell().textContent = String(r);
      var name = row.insertCell();
      name.textContent = runName(r);
      name.title = run.dir;
      row.insertCell().textContent = String(run.seed);
      row.insertCell().textContent = points(run.eval_token_acc);
    });
    $('runs').appendChild(table);
  }

  function option(select, value, text) {
    var element = document.createElement('option');
    element.value = value;
    element.textContent = text;
    select.appendChild(element);
  }

  function buildControls() {
    var sequence = $('sequence');
    data.sequences.forEach(function (s, i) {
      var preview = s.tokens.slice(0, 8).join(' ');
      option(sequence, i, '#' + s.probe_index + ' (' + s.tokens.length + ' tokens): ' +
        preview + (s.tokens.length > 8 ? ' \u2026' : ''));
    });
    sequence.addEventListener('change', function () {
      select(state.layer, state.slot, Number(sequence.value));
    });
    var layer = $('layer');
    for (var l = 0; l < data.n_layers; l++) { option(layer, l, String(l)); }
    layer.addEventListener('change', function () {
      select(Number(layer.value), state.slot, state.sequence);
    });
    ['run-a', 'run-b'].forEach(function (id) {
      data.runs.forEach(function (run, r) {
        option($(id), r, r + ': ' + runName(r) + ', seed ' + run.seed);
      });
      $(id).addEventListener('change', function () {
        pair(Number($('run-a').value), Number($('run-b').value));
      });
    });
  }

  function syncControls() {
    $('sequence').value = state.sequence;
    $('layer').value = state.layer;
    $('run-a').value = state.a;
    $('run-b').value = state.b;
  }

  // ---- matched heads ---------------------------------------------------------------------

  // The layer and sequence the grid shows: it is rebuilt only when they change (a new slot
  // only moves the highlight).
  var gridOf = null;

  function drawGrid() {
    var key = state.layer + ':' + state.sequence;
    if (gridOf !== key) {
      gridOf = key;
      buildGrid();
    }
    var cells = $('grid').querySelectorAll('.grid-cell');
    for (var i = 0; i < cells.length; i++) {
      var canvas = cells[i].querySelector('canvas');
      cells[i].classList.toggle('selected',
        Number(canvas.getAttribute('data-slot')) === state.slot);
    }
  }

  function buildGrid() {
    var grid = $('grid');
    grid.textContent = '';
    var runs = data.runs.length;
    var size = Math.max(56, Math.min(110, Math.floor(1150 / Math.max(1, runs)) - 12));
    grid.style.gridTemplateColumns = '4rem repeat(' + runs + ', ' + (size + 12) + 'px)';
    grid.appendChild(document.createElement('div'));
    data.runs.forEach(function (run, r) {
      var head = document.createElement('div');
      head.className = 'run-head';
      head.title = run.dir;
      head.textContent = run.name;
      head.appendChild(document.createElement('br'));
      head.appendChild(document.createTextNode(
        (r === 0 ? 'reference, ' : '') + 'seed ' + run.seed));
      grid.appendChild(head);
    });
    var sequence = data.sequences[state.sequence];
    var n = sequence.tokens.length;
    for (var s = 0; s < data.n_heads; s++) {
      var label = document.createElement('div');
      label.className = 'row-label';
      label.textContent = 'L' + state.layer + 'H' + s;
      label.title = 'slot: head ' + s + ' of the reference run';
      grid.appendChild(label);
      for (var r = 0; r < runs; r++) {
        var matched = slot(state.layer, s).matched[r];
        var wrap = document.createElement('div');
        wrap.className = 'grid-cell';
        var canvas = document.createElement('canvas');
        canvas.className = 'cell';
        canvas.setAttribute('data-layer', String(state.layer));
        canvas.setAttribute('data-slot', String(s));
        canvas.setAttribute('data-run', String(r));
        var context = sizeCanvas(canvas, size, size);
        context.imageSmoothingEnabled = false;
        context.drawImage(patternPixels(sequence.patterns[state.layer][s][r], n), 0, 0,
          size, size);
        wrap.appendChild(canvas);
        var caption = document.createElement('div');
        caption.textContent = headName(matched) + ' ' + matched.role;
        caption.appendChild(document.createElement('br'));
        caption.appendChild(document.createTextNode('sim ' + matched.similarity.toFixed(2)));
        wrap.appendChild(caption);
        wrap.title = data.runs[r].name + ': head ' + matched.head + ' of layer ' +
          matched.layer + ', matched to slot L' + state.layer + 'H' + s;
        // Block-scoped copies: `s` is a `var`, shared by every iteration. (And not
        // select.bind(...): the click event would arrive as the sequence.)
        const layer = state.layer;
        const slotIndex = s;
        wrap.addEventListener('click', () => select(layer, slotIndex));
        grid.appendChild(wrap);
      }
    }
  }

  // ---- slot view -------------------------------------------------------------------------

  // Rebuilds the panels (new images) for the current layer, slot and sequence.
  function buildSlotView() {
    var view = $('slot-view');
    view.textContent = '';
    panels = [];
    var sequence = data.sequences[state.sequence];
    var n = sequence.tokens.length;
    var runs = data.runs.length;
    // Up to four panels a row at a comfortable size; small sequences need less.
    var size = Math.max(160, Math.min(320, Math.floor(1250 / Math.min(4, runs)) - 110));
    size = Math.max(size, Math.min(320, n));
    data.runs.forEach(function (run, r) {
      var matched = slot(state.layer, state.slot).matched[r];
      var panel = document.createElement('div');
      panel.className = 'panel';
      var title = document.createElement('div');
      title.className = 'title';
      title.textContent = runName(r);
      title.title = run.dir;
      panel.appendChild(title);
      var line = document.createElement('div');
      line.textContent = 'seed ' + run.seed + ' \u00b7 L' + matched.layer + 'H' + matched.head +
        ' \u00b7 ' + matched.role + ' \u00b7 sim ' + matched.similarity.toFixed(2);
      panel.appendChild(line);
      var canvas = document.createElement('canvas');
      canvas.setAttribute('data-run', String(r));
      panel.appendChild(canvas);
      view.appendChild(panel);
      var entry = {
        canvas: canvas,
        source: patternPixels(sequence.patterns[state.layer][state.slot][r], n),
        size: size,
        box: null
      };
      panels.push(entry);
      canvas.addEventListener('mousemove', function (event) {
        setHover(hitRow(entry, event));
      });
      canvas.addEventListener('mouseleave', function () { setHover(null); });
    });
    view.setAttribute('data-layer', String(state.layer));
    view.setAttribute('data-slot', String(state.slot));
    view.setAttribute('data-sequence', String(state.sequence));
    view.setAttribute('data-runs', String(panels.length));
    drawSlotView();
  }

  // Redraws the panels from their images, with the hovered row (cheap: one drawImage each).
  function drawSlotView() {
    var tokens = data.sequences[state.sequence].tokens;
    panels.forEach(function (entry) {
      entry.box = drawHeatmap(entry.canvas, entry.source, tokens, entry.size, state.hover);
      entry.canvas.title = state.hover === null ? ''
        : 'query ' + state.hover + ': ' + tokens[state.hover];
    });
    $('slot-view').setAttribute('data-hover', state.hover === null ? 'none' : String(state.hover));
  }

  // The query row under the mouse, or null outside the heatmap.
  function hitRow(entry, event) {
    var box = entry.box;
    if (!box) { return null; }
    var rect = entry.canvas.getBoundingClientRect();
    var x = event.clientX - rect.left - box.left;
    var y = event.clientY - rect.top - box.top;
    if (x < 0 || x >= box.size || y < 0 || y >= box.size) { return null; }
    return Math.min(box.n - 1, Math.floor(y / box.cell));
  }

  function setHover(query) {
    if (query === undefined) { query = null; }
    if (query !== null) {
      var n = data.sequences[state.sequence].tokens.length;
      if (!(query >= 0 && query < n)) { throw new Error('no query ' + query); }
    }
    if (query === state.hover) { return; }
    state.hover = query;
    drawSlotView();
  }

  // ---- diff view -------------------------------------------------------------------------

  function buildDiffTable() {
    var table = $('diff-table');
    table.textContent = '';
    var a = state.a;
    var b = state.b;
    var head = table.createTHead();
    var top = head.insertRow();
    var sub = head.insertRow();
    function th(row, text, className, span, title) {
      var cell = document.createElement('th');
      cell.textContent = text;
      if (className) { cell.className = className; }
      if (span) { cell.colSpan = span; }
      if (title) { cell.title = title; }
      row.appendChild(cell);
      return cell;
    }
    [['slot', 'the reference run\'s head'], ['A head', ''], ['B head', ''],
      ['role in A', ''], ['role in B', '']].forEach(function (c) {
      th(top, c[0], 'left', 0, c[1]).rowSpan = 2;
    });
    data.measures.forEach(function (name, index) {
      th(top, measureLabel(index), 'group', 3, name);
      th(sub, 'A', 'first');
      th(sub, 'B');
      th(sub, 'B\u2212A');
    });
    th(top, 'similarity A\u2013B', 'group', 0,
      'pattern similarity of the two heads (1 - Jensen-Shannon distance) on the whole probe')
      .rowSpan = 2;
    var body = table.createTBody();
    var rows = 0;
    for (var l = 0; l < data.n_layers; l++) {
      for (var s = 0; s < data.n_heads; s++) {
        var x = slot(l, s);
        var ma = x.matched[a];
        var mb = x.matched[b];
        var row = body.insertRow();
        row.setAttribute('data-layer', String(l));
        row.setAttribute('data-slot', String(s));
        var cells = ['L' + l + 'H' + s, 'L' + ma.layer + 'H' + ma.head, 'L' + mb.layer + 'H' + mb.head, ma.role, mb.role];
        cells.forEach(function (text, i) {
          var cell = row.insertCell();
          cell.textContent = text;
          if (i === 0 || i >= 3) { cell.className = 'left'; }
        });
        data.measures.forEach(function (name, m) {
          var va = ma.measures[m];
          var vb = mb.measures[m];
          var first = row.insertCell();
          first.className = 'first';
          first.textContent = format(va);
          row.insertCell().textContent = format(vb);
          var delta = row.insertCell();
          if (va === null || vb === null) {
            delta.textContent = '\u2013';
          } else {
            var d = vb - va;
            // Differences that round to 0 print as 0, not "-0.000".
            var zero = Math.abs(d) < 0.0005;
            delta.textContent = zero ? '0.000' : (d > 0 ? '+' : '') + d.toFixed(3);
            delta.className = zero ? 'zero' : d > 0 ? 'pos' : 'neg';
          }
        });
        var similarity = row.insertCell();
        similarity.className = 'first';
        similarity.textContent = x.similarity_between[a][b].toFixed(3);
        row.addEventListener('click', diff.bind(null, l, s));
        rows++;
      }
    }
    table.setAttribute('data-a', String(a));
    table.setAttribute('data-b', String(b));
    table.setAttribute('data-rows', String(rows));
    markDiffRow();
  }

  function markDiffRow() {
    var rows = $('diff-table').querySelectorAll('tbody tr');
    for (var i = 0; i < rows.length; i++) {
      var picked = state.diff !== null &&
        Number(rows[i].getAttribute('data-layer')) === state.diff.layer &&
        Number(rows[i].getAttribute('data-slot')) === state.diff.slot;
      rows[i].classList.toggle('selected', picked);
    }
  }

  // A's and B's heads of the picked slot and B - A on the chosen sequence; the diverging
  // scale runs to the largest difference (at least 0.05, so noise stays pale).
  function drawDiff() {
    var canvas = $('diff-canvas');
    markDiffRow();
    if (state.diff === null) {
      canvas.setAttribute('data-slot', 'none');
      canvas.setAttribute('data-layer', 'none');
      return;
    }
    var l = state.diff.layer;
    var s = state.diff.slot;
    var sequence = data.sequences[state.sequence];
    var tokens = sequence.tokens;
    var n = tokens.length;
    var va = sequence.patterns[l][s][state.a];
    var vb = sequence.patterns[l][s][state.b];
    var largest = 0;
    for (var i = 0; i < n * n; i++) { largest = Math.max(largest, Math.abs(vb[i] - va[i])); }
    var scale = Math.max(50, largest);
    var size = Math.max(200, Math.min(300, n));
    var ma = slot(l, s).matched[state.a];
    var mb = slot(l, s).matched[state.b];
    drawHeatmap($('diff-a-canvas'), patternPixels(va, n), tokens, size, null);
    drawHeatmap($('diff-b-canvas'), patternPixels(vb, n), tokens, size, null);
    drawHeatmap(canvas, pixels(n, function (k) { return diverging((vb[k] - va[k]) / scale); }),
      tokens, size, null);
    // The diverging scale centred on 0 (no difference), to the largest difference.
    colourBar($('diff-colour-bar'), function (t) { return diverging(2 * t - 1); },
      [-scale / 1000, scale / 1000], 'B \u2212 A attention probability');
    $('diff-a-caption').textContent = 'A: ' + runName(state.a) + ', L' + ma.layer + 'H' + ma.head +
      ' (' + ma.role + ')';
    $('diff-b-caption').textContent = 'B: ' + runName(state.b) + ', L' + mb.layer + 'H' + mb.head +
      ' (' + mb.role + ')';
    var caption = $('diff-caption');
    caption.textContent = 'B \u2212 A, slot L' + l + 'H' + s + ' on probe sequence #' +
      sequence.probe_index + ': red where B attends more, blue where A does; full colour at ' +
      '\u00b1' + (scale / 1000).toFixed(3) + ' (largest difference ' +
      (largest / 1000).toFixed(3) + ').';
    canvas.setAttribute('data-slot', String(s));
    canvas.setAttribute('data-layer', String(l));
  }

  // ---- what the UI and the test hooks call -----------------------------------------------

  function select(layer, index, sequence) {
    checkLayerSlot(layer, index);
    if (sequence !== undefined) {
      if (!(sequence >= 0 && sequence < data.sequences.length)) {
        throw new Error('no embedded sequence ' + sequence);
      }
      state.sequence = sequence;
    }
    state.layer = layer;
    state.slot = index;
    state.hover = null;
    syncControls();
    drawGrid();
    buildSlotView();
    drawDiff();
  }

  function pair(a, b) {
    checkRun(a);
    checkRun(b);
    state.a = a;
    state.b = b;
    syncControls();
    buildDiffTable();
    drawDiff();
  }

  function diff(layer, index) {
    checkLayerSlot(layer, index);
    state.diff = { layer: layer, slot: index };
    drawDiff();
  }

  try {
    data = JSON.parse($('data').textContent);
    if (!data.sequences.length || !data.n_heads || !data.runs.length) {
      throw new Error('the comparison has no probe sequences, no heads or no runs');
    }
    window.headlabCompare = {
      data: data,
      select: select,
      pair: pair,
      hover: setHover,
      diff: diff
    };
    state.b = Math.min(1, data.runs.length - 1);
    buildRuns();
    buildControls();
    colourBar($('grid-colour-bar'), viridis, [0, 1], 'attention probability');
    select(0, 0, 0);
    pair(state.a, state.b);
    document.body.setAttribute('data-ready', 'ok');
  } catch (error) {
    document.body.setAttribute('data-ready', 'error: ' + error.message);
    reportError(error.message);
  }
})();
