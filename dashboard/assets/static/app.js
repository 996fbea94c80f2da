// mcptask dashboard: live updates (Server-Sent Events) and the list's
// selection. No inline script: the page's Content-Security-Policy allows
// this file only. Fragments come rendered (and escaped) by the server;
// they are parsed with DOMParser, which runs no script.
(function () {
  'use strict';

  var state = document.getElementById('live-state');
  function setState(text, cls) {
    if (!state) return;
    state.textContent = text;
    state.className = 'live-state ' + cls;
  }

  function parseBody(html) {
    return new DOMParser().parseFromString(html, 'text/html').body;
  }

  function parseRow(html) {
    var doc = new DOMParser().parseFromString('<table><tbody>' + html + '</tbody></table>', 'text/html');
    return doc.querySelector('tr');
  }

  function replaceChildrenFrom(target, html) {
    var body = parseBody(html);
    var nodes = Array.prototype.map.call(body.childNodes, function (n) { return document.adoptNode(n); });
    target.replaceChildren.apply(target, nodes);
  }

  var body = document.body;
  var page = body.dataset.page;
  var liveURL = body.dataset.live;

  // The list: "select all" and the bulk button.
  var all = document.getElementById('select-all');
  if (all) {
    all.addEventListener('change', function () {
      document.querySelectorAll('input.sel').forEach(function (c) { c.checked = all.checked; });
    });
  }

  // Relative times ("5 min ago") kept current; the exact time is in the
  // element's title.
  function ago(iso) {
    var d = (Date.now() - Date.parse(iso)) / 1000;
    if (isNaN(d)) return null;
    if (d < 2) return 'just now';
    if (d < 60) return Math.floor(d) + ' s ago';
    if (d < 3600) return Math.floor(d / 60) + ' min ago';
    if (d < 172800) return Math.floor(d / 3600) + ' h ago';
    return Math.floor(d / 86400) + ' d ago';
  }
  setInterval(function () {
    document.querySelectorAll('time[data-ago]').forEach(function (t) {
      var s = ago(t.getAttribute('datetime'));
      if (s) t.textContent = s;
    });
  }, 15000);

  if (!liveURL || !window.EventSource) return;
  var es = new EventSource(liveURL);
  es.onopen = function () { setState('live', 'on'); body.dataset.liveState = 'open'; };
  es.onerror = function () { setState('reconnecting…', 'off'); body.dataset.liveState = 'reconnecting'; };

  if (page === 'list') {
    var rows = document.getElementById('rows');
    var paged = body.dataset.paged === '1';
    es.addEventListener('row', function (e) {
      var tr = parseRow(e.data);
      if (!tr || !rows) return;
      var old = document.getElementById(tr.id);
      var sel = old && old.querySelector('input.sel');
      var wasChecked = sel && sel.checked;
      tr = document.adoptNode(tr);
      if (old) {
        old.replaceWith(tr);
      } else if (!paged) {
        // A new task: newest first, on the first page only.
        var empty = rows.querySelector('tr.empty');
        if (empty) empty.remove();
        rows.prepend(tr);
        while (rows.children.length > 50) rows.lastElementChild.remove();
      } else {
        return;
      }
      var ns = tr.querySelector('input.sel');
      if (ns && wasChecked) ns.checked = true;
      tr.classList.add('changed');
      setTimeout(function () { tr.classList.remove('changed'); }, 1500);
    });
    es.addEventListener('gone', function (e) {
      var old = document.getElementById('row-' + e.data);
      if (old) old.classList.add('gone');
    });
    es.addEventListener('counts', function (e) {
      var c = document.getElementById('counts');
      if (c) replaceChildrenFrom(c, e.data);
    });
  } else if (page === 'task') {
    es.addEventListener('task', function (e) {
      var s = document.getElementById('task-live');
      if (s) replaceChildrenFrom(s, e.data);
    });
    es.addEventListener('gone', function () {
      setState('deleted', 'off');
      es.close();
      var s = document.getElementById('task-status');
      if (s) s.textContent = 'deleted';
    });
  }
})();
