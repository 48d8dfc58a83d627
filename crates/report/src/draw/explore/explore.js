// explore.js: the interactive views of explore.html (model, head, query/key), drawn on
// canvases from the JSON in <script id="data"> (see crates/report/src/draw/explore.rs for its
// format). Vanilla JS, no network.
//
// For automated checks the page publishes its state as attributes:
// - <body data-ready="ok"> once the first views are drawn (or "error: ..."), and
//   data-errors="..." for any script error (window.onerror);
// - the head canvas has data-sequence, data-layer, data-heads ("0,2"), data-hover
//   ("none", "query 3" or "key 5") and data-lines (lines drawn);
// - the query/key canvas has data-layer, data-head and data-points;
// - the patching canvas has data-kind ("answer", "route", "own" or "none"), data-rows and
//   data-cols (cells drawn);
// - the colour bars #model-colour-bar and #patching-colour-bar have data-min, data-max and
//   data-unit;
// - window.headlabExplore.select(layer, heads, sequence) and .hover(side, index) drive the
//   views without a mouse; .tokenPosition(side, index) says where a token sits on the head
//   canvas, for tests that drive a real mouse.
(function () {
  'use strict';

  // Query/key pairs with less attention than this get no line in the head view, which
  // keeps long sequences responsive (at most 100 lines per query and head).
  var LINE_THRESHOLD = 0.01;
  // One colour per head (matplotlib's tab10), by head index.
  var HEAD_COLOURS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd',
    '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];

  // Shared with the other page (embed/page.js, loaded first).
  var reportError = headlabPage.reportError;
  var sizeCanvas = headlabPage.sizeCanvas;
  var viridis = headlabPage.viridis;
  var colourBar = headlabPage.colourBar;

  var data;
  // What is shown: probe sequence (index into data.sequences), layer, selected heads and
  // the hovered token in the head view ({side: 'query' | 'key', index} or null).
  var state = { sequence: 0, layer: 0, heads: [0], hover: null, unit: 'words' };
  // The head view's geometry, set when it is drawn (for hit-testing the mouse).
  var geometry = null;

  function $(id) { return document.getElementById(id); }

  // tab10 for the first ten heads; after them hues a golden angle apart, so that no two
  // heads of a layer share a colour (BERT has 12, BERT-large 16).
  function headColour(h) {
    if (h < HEAD_COLOURS.length) { return HEAD_COLOURS[h]; }
    return 'hsl(' + Math.round((h * 137.508) % 360) + ', 70%, ' + (h % 2 ? 38 : 52) + '%)';
  }

  function record(layer, head) { return data.heads[layer * data.n_heads + head]; }

  // A stable colour per token label: a string hash times the golden angle as hue, so
  // labels that differ by one character (as "7" and "8") still get far-apart hues.
  function tokenColour(label) {
    var hash = 0;
    for (var i = 0; i < label.length; i++) {
      hash = (hash * 31 + label.charCodeAt(i)) >>> 0;
    }
    return 'hsl(' + Math.round((hash * 137.508) % 360) + ',70%,45%)';
  }

  // Blue (first position) to red (last).
  function positionColour(position, length) {
    var t = length > 1 ? position / (length - 1) : 0;
    return 'hsl(' + Math.round(240 - 240 * t) + ',75%,45%)';
  }

  function format(value) {
    if (value === null || value === undefined) { return '\u2013'; }
    if (typeof value === 'number') {
      return Number.isInteger(value) ? String(value) : value.toFixed(3);
    }
    return String(value);
  }

  // ---- controls -------------------------------------------------------------------------

  // What the model and head views show of `sequence`: its words, or (a model that reads word
  // pieces, pieces chosen) its pieces with their own attention.
  function shown(sequence) {
    return state.unit === 'pieces' && sequence.pieces ? sequence.pieces : sequence;
  }

  function buildControls() {
    var sequence = $('sequence');
    data.sequences.forEach(function (s, i) {
      var option = document.createElement('option');
      option.value = i;
      var preview = s.tokens.slice(0, 8).join(' ');
      option.textContent = '#' + s.probe_index + ' (' + s.tokens.length + ' tokens): ' +
        preview + (s.tokens.length > 8 ? ' \u2026' : '');
      sequence.appendChild(option);
    });
    sequence.addEventListener('change', function () {
      state.sequence = Number(sequence.value);
      state.hover = null;
      renderAll();
    });

    var layer = $('layer');
    for (var l = 0; l < data.n_layers; l++) {
      var option = document.createElement('option');
      option.value = l;
      option.textContent = String(l);
      layer.appendChild(option);
    }
    layer.addEventListener('change', function () {
      state.layer = Number(layer.value);
      renderAll();
    });

    var heads = $('heads');
    for (var h = 0; h < data.n_heads; h++) {
      var label = document.createElement('label');
      var box = document.createElement('input');
      box.type = 'checkbox';
      box.value = h;
      box.id = 'head-' + h;
      box.addEventListener('change', function () {
        state.heads = checkedHeads();
        renderAll();
      });
      var swatch = document.createElement('span');
      swatch.className = 'swatch';
      swatch.style.background = headColour(h);
      label.appendChild(box);
      label.appendChild(swatch);
      label.appendChild(document.createTextNode(String(h)));
      heads.appendChild(label);
    }
    $('colour').addEventListener('change', drawQueryKey);

    // Words or pieces, for a report whose sequences have both.
    var unit = $('unit');
    if (data.sequences[0].pieces) {
      $('unit-control').hidden = false;
      unit.addEventListener('change', function () {
        state.unit = unit.value;
        state.hover = null;
        renderAll();
      });
    }
  }

  function checkedHeads() {
    var checked = [];
    for (var h = 0; h < data.n_heads; h++) {
      if ($('head-' + h).checked) { checked.push(h); }
    }
    return checked;
  }

  // Puts the controls in line with `state`.
  function syncControls() {
    $('sequence').value = state.sequence;
    $('layer').value = state.layer;
    $('unit').value = state.unit;
    for (var h = 0; h < data.n_heads; h++) {
      $('head-' + h).checked = state.heads.indexOf(h) >= 0;
    }
  }

  // ---- model view -----------------------------------------------------------------------

  function buildModelView() {
    var grid = $('model-grid');
    var size = Math.max(48, Math.min(110, Math.floor(1100 / Math.max(1, data.n_heads))));
    grid.style.gridTemplateColumns = '3rem repeat(' + data.n_heads + ', ' + (size + 8) + 'px)';
    for (var l = 0; l < data.n_layers; l++) {
      var rowLabel = document.createElement('div');
      rowLabel.className = 'row-label';
      rowLabel.textContent = 'L' + l;
      grid.appendChild(rowLabel);
      for (var h = 0; h < data.n_heads; h++) {
        var cell = document.createElement('div');
        cell.className = 'cell';
        cell.id = 'thumb-' + l + '-' + h;
        var canvas = document.createElement('canvas');
        sizeCanvas(canvas, size, size);
        cell.appendChild(canvas);
        var caption = document.createElement('div');
        var head = record(l, h);
        caption.textContent = 'H' + h + (head ? ' ' + head.role : '');
        cell.appendChild(caption);
        cell.addEventListener('click', openHead.bind(null, l, h));
        grid.appendChild(cell);
      }
    }
  }

  function openHead(layer, head) {
    state.layer = layer;
    state.heads = [head];
    state.hover = null;
    renderAll();
    $('head-wrap').scrollIntoView({ block: 'nearest' });
  }

  // The sequence the thumbnails show: they are redrawn only when it changes (a new
  // selection only moves the highlight).
  var thumbnailsOf = null;

  function drawModelView() {
    for (var layer = 0; layer < data.n_layers; layer++) {
      for (var head = 0; head < data.n_heads; head++) {
        var selected = layer === state.layer && state.heads.indexOf(head) >= 0;
        $('thumb-' + layer + '-' + head).classList.toggle('selected', selected);
      }
    }
    var shownKey = state.sequence + ' ' + state.unit;
    if (thumbnailsOf === shownKey) { return; }
    thumbnailsOf = shownKey;
    var sequence = shown(data.sequences[state.sequence]);
    var n = sequence.tokens.length;
    // One pixel per query/key pair, scaled up without smoothing.
    var source = document.createElement('canvas');
    source.width = n;
    source.height = n;
    var sourceContext = source.getContext('2d');
    for (var l = 0; l < data.n_layers; l++) {
      for (var h = 0; h < data.n_heads; h++) {
        var values = sequence.patterns[l][h];
        var image = sourceContext.createImageData(n, n);
        for (var i = 0; i < n * n; i++) {
          var rgb = viridis(values[i] / 1000);
          image.data[4 * i] = rgb[0];
          image.data[4 * i + 1] = rgb[1];
          image.data[4 * i + 2] = rgb[2];
          image.data[4 * i + 3] = 255;
        }
        sourceContext.putImageData(image, 0, 0);
        var cell = $('thumb-' + l + '-' + h);
        var canvas = cell.querySelector('canvas');
        var context = canvas.getContext('2d');
        var size = parseFloat(canvas.style.width);
        context.imageSmoothingEnabled = false;
        context.clearRect(0, 0, size, size);
        context.drawImage(source, 0, 0, size, size);
      }
    }
  }

  // ---- head view ------------------------------------------------------------------------

  function drawHeadView() {
    var canvas = $('head-canvas');
    var sequence = shown(data.sequences[state.sequence]);
    var tokens = sequence.tokens;
    var n = tokens.length;
    // Rows shrink with the sequence; labels are drawn while they stay legible.
    var rowHeight = n <= 40 ? 20 : Math.max(4, Math.floor(1400 / n));
    var showLabels = rowHeight >= 8;
    var labelWidth = 150;
    var gap = 260;
    var top = 24;
    var width = 2 * labelWidth + gap + 20;
    var height = top + n * rowHeight + 10;
    var context = sizeCanvas(canvas, width, height);
    var leftX = 10 + labelWidth;
    var rightX = leftX + gap;
    geometry = { top: top, rowHeight: rowHeight, middle: (leftX + rightX) / 2, n: n };

    context.fillStyle = '#fff';
    context.fillRect(0, 0, width, height);
    context.fillStyle = '#555';
    context.font = '12px system-ui, sans-serif';
    context.textAlign = 'right';
    context.fillText('queries', leftX - 6, 14);
    context.textAlign = 'left';
    context.fillText('keys', rightX + 6, 14);

    var hover = state.hover;
    if (hover) {
      context.fillStyle = '#fff3b0';
      var hx = hover.side === 'query' ? 10 : rightX;
      context.fillRect(hx, top + hover.index * rowHeight, labelWidth, rowHeight);
    }

    // Lines: each selected head in turn, alpha by weight.
    var lines = 0;
    context.lineWidth = hover ? 2 : 1.5;
    state.heads.forEach(function (h) {
      var values = sequence.patterns[state.layer][h];
      context.strokeStyle = headColour(h);
      for (var q = 0; q < n; q++) {
        if (hover && hover.side === 'query' && hover.index !== q) { continue; }
        var y1 = top + (q + 0.5) * rowHeight;
        for (var k = 0; k < n; k++) {
          if (hover && hover.side === 'key' && hover.index !== k) { continue; }
          var weight = values[q * n + k] / 1000;
          if (weight < LINE_THRESHOLD) { continue; }
          context.globalAlpha = Math.min(1, weight);
          context.beginPath();
          context.moveTo(leftX, y1);
          context.lineTo(rightX, top + (k + 0.5) * rowHeight);
          context.stroke();
          lines++;
        }
      }
    });
    context.globalAlpha = 1;

    if (showLabels) {
      context.font = Math.min(13, rowHeight - 3) + 'px system-ui, sans-serif';
      context.textBaseline = 'middle';
      context.fillStyle = '#222';
      for (var i = 0; i < n; i++) {
        var y = top + (i + 0.5) * rowHeight;
        var label = tokens[i].length > 18 ? tokens[i].slice(0, 17) + '\u2026' : tokens[i];
        context.textAlign = 'right';
        context.fillText(label, leftX - 6, y);
        context.textAlign = 'left';
        context.fillText(label, rightX + 6, y);
      }
    } else {
      // Position ticks instead of labels; hovering names the token in the title.
      context.fillStyle = '#999';
      for (var t = 0; t < n; t++) {
        var ty = top + t * rowHeight;
        context.fillRect(leftX - 6, ty, 4, Math.max(1, rowHeight - 1));
        context.fillRect(rightX + 2, ty, 4, Math.max(1, rowHeight - 1));
      }
    }
    canvas.title = hover ? hover.side + ' ' + hover.index + ': ' + tokens[hover.index] : '';

    canvas.setAttribute('data-sequence', String(state.sequence));
    canvas.setAttribute('data-layer', String(state.layer));
    canvas.setAttribute('data-unit', state.unit);
    canvas.setAttribute('data-tokens', String(n));
    canvas.setAttribute('data-heads', state.heads.join(','));
    canvas.setAttribute('data-hover', hover ? hover.side + ' ' + hover.index : 'none');
    canvas.setAttribute('data-lines', String(lines));
  }

  // The token under the mouse: left half queries, right half keys.
  function hitTest(event) {
    if (!geometry) { return null; }
    var rect = $('head-canvas').getBoundingClientRect();
    var x = event.clientX - rect.left;
    var y = event.clientY - rect.top;
    var index = Math.floor((y - geometry.top) / geometry.rowHeight);
    if (index < 0 || index >= geometry.n) { return null; }
    return { side: x < geometry.middle ? 'query' : 'key', index: index };
  }

  function setHover(hover) {
    var old = state.hover;
    var same = (old === null && hover === null) ||
      (old && hover && old.side === hover.side && old.index === hover.index);
    if (same) { return; }
    state.hover = hover;
    drawHeadView();
    drawQueryKey();
  }

  function bindHeadView() {
    var canvas = $('head-canvas');
    canvas.addEventListener('mousemove', function (event) { setHover(hitTest(event)); });
    canvas.addEventListener('mouseleave', function () { setHover(null); });
  }

  // ---- measures -------------------------------------------------------------------------

  // Fields of a heads.json record shown first, then the rest in record order.
  var FIRST_FIELDS = ['role', 'entropy', 'confidence', 'mean_distance', 'ablation_drop',
    'task_target_score', 'copying_score'];

  function drawMeasures() {
    var panel = $('measures');
    panel.textContent = '';
    state.heads.forEach(function (h) {
      var head = record(state.layer, h);
      if (!head) { return; }
      var table = document.createElement('table');
      var caption = table.createCaption();
      var swatch = document.createElement('span');
      swatch.className = 'swatch';
      swatch.style.background = headColour(h);
      caption.appendChild(swatch);
      caption.appendChild(document.createTextNode('layer ' + state.layer + ' head ' + h));
      var keys = FIRST_FIELDS.concat(Object.keys(head).filter(function (key) {
        return FIRST_FIELDS.indexOf(key) < 0 && key !== 'layer' && key !== 'head' &&
          key !== 'pattern_scores' && key !== 'relation_scores';
      }));
      function row(name, value) {
        var tr = table.insertRow();
        var th = document.createElement('th');
        th.textContent = name;
        tr.appendChild(th);
        tr.insertCell().textContent = value;
      }
      keys.forEach(function (key) {
        if (!(key in head)) { return; }
        var value = head[key];
        // The unit the page shows it in (data.units, from Rust): heads.json keeps fractions,
        // the drops are shown in points, as index.html's head table shows them.
        var unit = data.units[key];
        // index.html's name for the field where it has one ("zero drop"), else the field's.
        var name = data.labels[key] || key;
        var label = unit ? name + ' (' + unit + ')' : name;
        // null (a dash): not measured, as an imported model's ablation drop.
        if (unit === 'points' && value !== null) {
          row(label, (100 * value).toFixed(2));
        } else {
          row(label, format(value));
        }
      });
      Object.keys(head.pattern_scores || {}).forEach(function (name) {
        row('pattern ' + name + ' (' + data.units['pattern_scores.'] + ')',
          format(head.pattern_scores[name]));
      });
      bestRelations(head.relation_scores).forEach(function (best, i) {
        row(i === 0 ? 'best relations' : '', best);
      });
      panel.appendChild(table);
    });
    if (!state.heads.length) {
      panel.textContent = 'Select a head to see its measures.';
    }
  }

  // A head's three best relation scores (heads.json's relation_scores), each in its better
  // direction: "nsubj dep→head 0.620", among the relations the report's table shows (enough
  // arcs that a score is not an accident of a few). The rest are in relations.json.
  function bestRelations(scores) {
    var shown = data.shown_relations || [];
    return Object.keys(scores || {}).filter(function (name) {
      return !shown.length || shown.indexOf(name) >= 0;
    }).map(function (name) {
      var s = scores[name];
      var up = s.dependent_to_head >= s.head_to_dependent;
      return { text: name + (up ? ' dep\u2192head ' : ' head\u2192dep ') +
        (up ? s.dependent_to_head : s.head_to_dependent).toFixed(3),
        score: Math.max(s.dependent_to_head, s.head_to_dependent) };
    }).sort(function (a, b) { return b.score - a.score; }).slice(0, 3)
      .map(function (best) { return best.text; });
  }

  // ---- query/key view -------------------------------------------------------------------

  function drawQueryKey() {
    var canvas = $('qk-canvas');
    var legend = $('qk-legend');
    var size = 520;
    var context = sizeCanvas(canvas, size, size);
    context.fillStyle = '#fff';
    context.fillRect(0, 0, size, size);
    var head = state.heads[0];
    canvas.setAttribute('data-layer', String(state.layer));
    canvas.setAttribute('data-head', head === undefined ? 'none' : String(head));
    if (!data.qk.length || head === undefined) {
      canvas.setAttribute('data-points', '0');
      legend.textContent = data.qk.length ? 'Select a head.' : 'No query/key data in this report.';
      return;
    }
    var projection = data.qk[state.layer][head];
    // The points are every sequence's positions in order; sequences may differ in length
    // (typed sentences), so each point is found by the sequences' starts.
    var starts = [];
    var total = 0;
    data.sequences.forEach(function (s) { starts.push(total); total += s.tokens.length; });
    var byToken = $('colour').value === 'token';
    var margin = 20;
    var scale = (size - 2 * margin) / 2;
    function px(p) { return [margin + (p[0] + 1) * scale, margin + (1 - p[1]) * scale]; }
    function colour(i) {
      var s = 0;
      while (s + 1 < starts.length && starts[s + 1] <= i) { s += 1; }
      var tokens = data.sequences[s].tokens;
      var position = i - starts[s];
      return byToken ? tokenColour(tokens[position]) : positionColour(position, tokens.length);
    }
    context.strokeStyle = '#eee';
    context.beginPath();
    context.moveTo(margin, size / 2);
    context.lineTo(size - margin, size / 2);
    context.moveTo(size / 2, margin);
    context.lineTo(size / 2, size - margin);
    context.stroke();
    context.globalAlpha = 0.75;
    projection.keys.forEach(function (p, i) {
      var xy = px(p);
      context.fillStyle = colour(i);
      context.fillRect(xy[0] - 3, xy[1] - 3, 6, 6);
    });
    projection.queries.forEach(function (p, i) {
      var xy = px(p);
      context.fillStyle = colour(i);
      context.beginPath();
      context.arc(xy[0], xy[1], 3.5, 0, 2 * Math.PI);
      context.fill();
    });
    context.globalAlpha = 1;
    // The hovered token of the head view, ringed (the view is of words: a hovered piece
    // has no point of its own).
    var hover = state.unit === 'words' ? state.hover : null;
    if (hover) {
      var points = hover.side === 'query' ? projection.queries : projection.keys;
      var point = points[starts[state.sequence] + hover.index];
      if (point) {
        var xy = px(point);
        context.strokeStyle = '#000';
        context.lineWidth = 2;
        context.beginPath();
        context.arc(xy[0], xy[1], 8, 0, 2 * Math.PI);
        context.stroke();
      }
    }
    canvas.setAttribute('data-points', String(projection.queries.length + projection.keys.length));
    legend.textContent = 'L' + state.layer + 'H' + head + ': ' +
      projection.queries.length + ' queries (dots) and ' + projection.keys.length +
      ' keys (squares) from ' + data.sequences.length + ' sequences. PC1 holds ' +
      (100 * projection.explained[0]).toFixed(1) + '% of the variance, PC2 ' +
      (100 * projection.explained[1]).toFixed(1) + '%. ' +
      (byToken ? 'Colour: token (one hue per token).'
        : 'Colour: position, blue (first) to red (last).') +
      ' The hovered token of the head view is ringed.';
  }

  // ---- patching view --------------------------------------------------------------------

  // The patching view's geometry, set when it is drawn (rows of heads, for clicks).
  var patchingGeometry = null;

  function patchingSections() {
    var sections = [];
    if (data.patching) {
      ['answer', 'route', 'own'].forEach(function (kind) {
        if (data.patching[kind]) { sections.push(kind); }
      });
    }
    return sections;
  }

  function buildPatchingView() {
    var select = $('pair-kind');
    var sections = patchingSections();
    sections.forEach(function (kind) {
      var option = document.createElement('option');
      option.value = kind;
      option.textContent = kind === 'own' ? 'your pairs (' + data.patching.own.written.file + ')'
        : kind + ' pairs';
      select.appendChild(option);
    });
    select.addEventListener('change', drawPatching);
    $('patching-canvas').addEventListener('click', function (event) {
      if (!patchingGeometry) { return; }
      var rect = event.target.getBoundingClientRect();
      var row = Math.floor((event.clientY - rect.top - patchingGeometry.top) /
        patchingGeometry.cell);
      var head = row - patchingGeometry.residualRows;
      if (head >= 0 && head < data.n_layers * data.n_heads) {
        openHead(Math.floor(head / data.n_heads), head % data.n_heads);
      }
    });
  }

  // White (0) to blue (1 or more), white to red below 0, as [r, g, b]: the pages' one
  // convention for signed values (embed/page.js).
  var restoredRgb = headlabPage.signedRgb;

  function restoredColour(value) {
    if (value === null || value === undefined) { return '#f4f4f4'; }
    var rgb = restoredRgb(value);
    return 'rgb(' + rgb[0] + ',' + rgb[1] + ',' + rgb[2] + ')';
  }

  function drawPatching() {
    var canvas = $('patching-canvas');
    var notes = $('patching-notes');
    var kind = $('pair-kind').value;
    var section = data.patching && kind ? data.patching[kind] : null;
    if (!section) {
      sizeCanvas(canvas, 1, 1);
      canvas.setAttribute('data-kind', 'none');
      canvas.setAttribute('data-rows', '0');
      canvas.setAttribute('data-cols', '0');
      patchingGeometry = null;
      // Why, as the report knows it (data.patching_absent): no minimal pairs, --no-patching,
      // or a model whose output layer is not scored.
      notes.textContent = data.patching_absent || 'No causal tests in this report.';
      return;
    }
    var positions = section.heads.length ? section.heads[0].by_position.length : 0;
    var rows = [];
    section.residual.forEach(function (place) {
      rows.push({ label: 'R' + place.layer, cells: place.by_position.concat([null]) });
    });
    section.heads.forEach(function (head) {
      rows.push({ label: 'L' + head.layer + 'H' + head.head,
        cells: head.by_position.concat([head.restored]) });
    });
    var cols = positions + 1;
    var cell = positions <= 40 ? 30 : Math.max(6, Math.floor(1200 / cols));
    var left = 60;
    var top = 22;
    var width = left + cols * cell + 10;
    var height = top + rows.length * cell + 10;
    var context = sizeCanvas(canvas, width, height);
    patchingGeometry = { top: top, cell: cell, residualRows: section.residual.length };
    context.fillStyle = '#fff';
    context.fillRect(0, 0, width, height);
    context.font = '11px system-ui, sans-serif';
    context.textBaseline = 'middle';
    var showNumbers = cell >= 26;
    var drawn = 0;
    rows.forEach(function (row, r) {
      var y = top + r * cell;
      context.fillStyle = '#444';
      context.textAlign = 'right';
      context.fillText(row.label, left - 6, y + cell / 2);
      row.cells.forEach(function (value, c) {
        if (value === null && c === positions && r < section.residual.length) { return; }
        var x = left + c * cell;
        context.fillStyle = restoredColour(value);
        context.fillRect(x, y, cell - 1, cell - 1);
        drawn += 1;
        if (showNumbers && value !== null) {
          context.fillStyle = Math.abs(value) > 0.6 ? '#fff' : '#222';
          context.textAlign = 'center';
          // Two decimals, and a plain 0 for what rounds to it ("-0.00" says nothing).
          var text = Math.abs(value) < 0.005 ? '0' : value.toFixed(2);
          context.fillText(text, x + cell / 2, y + cell / 2);
        }
      });
    });
    context.fillStyle = '#444';
    context.textAlign = 'center';
    for (var c = 0; c < cols; c++) {
      if (cell >= 16 || c === positions) {
        context.fillText(c === positions ? 'all' : String(c), left + (c + 0.5) * cell, 10);
      }
    }
    canvas.setAttribute('data-kind', kind);
    canvas.setAttribute('data-rows', String(rows.length));
    canvas.setAttribute('data-cols', String(cols));
    canvas.setAttribute('data-cells', String(drawn));

    var lines = [section.pairs + ' ' + (kind === 'own' ? 'pairs of your own' : kind + ' pairs') +
      '; logit difference clean ' + section.clean_logit_diff.toFixed(2) + ', corrupted ' +
      section.corrupted_logit_diff.toFixed(2) + '.'];
    var needed = section.heads.filter(function (head) {
      return head.mean_ablation_lost !== null && head.mean_ablation_lost !== undefined;
    }).sort(function (a, b) { return b.mean_ablation_lost - a.mean_ablation_lost; }).slice(0, 3);
    if (needed.length) {
      lines.push('Most needed (mean-ablated on the clean sentences, share of the margin lost): ' +
        needed.map(function (head) {
          return 'L' + head.layer + 'H' + head.head + ' ' + format(head.mean_ablation_lost);
        }).join(', ') + '.');
    }
    var byLayers = {};
    section.layer_paths.forEach(function (path) {
      var key = 'L' + path.sender_layer + ' \u2192 L' + path.receiver_layer;
      byLayers[key] = (byLayers[key] || []).concat([path.channel + ' ' + format(path.restored)]);
    });
    Object.keys(byLayers).forEach(function (key) {
      lines.push('Path patching, all of ' + key + ': ' + byLayers[key].join(', ') + '.');
    });
    var agreement = section.attribution;
    lines.push('Attribution patching against exact, correlation over heads ' +
      format(agreement.correlation_heads) + (agreement.worst_head ? ', worst head L' +
      agreement.worst_head.layer + 'H' + agreement.worst_head.head + ' off by ' +
      format(agreement.worst_error) : '') + '.');
    notes.textContent = '';
    lines.forEach(function (line) {
      var p = document.createElement('p');
      p.textContent = line;
      notes.appendChild(p);
    });
    if (section.written) {
      // The pairs as written, so a cell can be read against its sentences.
      var list = document.createElement('ol');
      list.id = 'own-pairs';
      section.written.pairs.forEach(function (pair) {
        var item = document.createElement('li');
        item.textContent = 'line ' + pair.line + ': ' + pair.clean + ' (' + pair.clean_answer +
          ') / ' + pair.corrupted + ' (' + pair.corrupted_answer + ')';
        list.appendChild(item);
      });
      notes.appendChild(list);
    }
  }

  // ---- all together ---------------------------------------------------------------------

  function renderAll() {
    syncControls();
    drawModelView();
    drawHeadView();
    drawMeasures();
    drawQueryKey();
  }

  // For automated tests: drive the views without a mouse.
  window.headlabExplore = {
    state: state,
    select: function (layer, heads, sequence) {
      state.layer = layer;
      state.heads = heads.slice();
      if (sequence !== undefined) { state.sequence = sequence; }
      state.hover = null;
      renderAll();
    },
    hover: function (side, index) {
      setHover(side ? { side: side, index: index } : null);
    },
    // Shows `kind`'s pairs ('answer', 'route' or 'own') in the patching view.
    pairs: function (kind) {
      $('pair-kind').value = kind;
      drawPatching();
    },
    // Where the mouse hovers token `index` ('query' or 'key') in the head view: {x, y} in
    // CSS pixels from the head canvas's top left corner (for the WebDriver test).
    tokenPosition: function (side, index) {
      if (!geometry) { return null; }
      var width = parseFloat($('head-canvas').style.width);
      return {
        x: side === 'query' ? geometry.middle / 2 : (geometry.middle + width) / 2,
        y: geometry.top + (index + 0.5) * geometry.rowHeight
      };
    }
  };

  try {
    data = JSON.parse($('data').textContent);
    if (!data.sequences.length || !data.n_heads) {
      throw new Error('the report has no probe sequences or no heads');
    }
    buildControls();
    buildModelView();
    bindHeadView();
    buildPatchingView();
    colourBar($('model-colour-bar'), viridis, [0, 1], 'attention probability');
    colourBar($('patching-colour-bar'), function (t) { return restoredRgb(2 * t - 1); },
      [-1, 1], 'fraction of the logit difference restored');
    renderAll();
    drawPatching();
    document.body.setAttribute('data-ready', 'ok');
  } catch (error) {
    document.body.setAttribute('data-ready', 'error: ' + error.message);
    reportError(error.message);
  }
})();
