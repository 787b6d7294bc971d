// OpenDLC console: the small scripts of the server-rendered pages. No library, no
// build step. Everything here improves a page that works without it (links and forms);
// live updates come from server-sent events.
"use strict";

(function () {
  // refresh replaces el's content with the HTML at url (a partial of the page).
  async function refresh(el, url) {
    const resp = await fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } });
    if (resp.redirected && resp.url.includes("/ui/login")) { location.reload(); return; }
    if (!resp.ok) return;
    el.innerHTML = await resp.text();
  }

  // debounce calls fn at most once per wait ms, after the last call.
  function debounce(fn, wait) {
    let timer = null;
    return function () {
      clearTimeout(timer);
      timer = setTimeout(fn, wait);
    };
  }

  // throttle calls fn at most once per wait ms, and once more after the last call.
  function throttle(fn, wait) {
    let timer = null, again = false;
    return function run() {
      if (timer) { again = true; return; }
      fn();
      timer = setTimeout(function () {
        timer = null;
        if (again) { again = false; run(); }
      }, wait);
    };
  }

  function withPartial(partial) {
    const u = new URL(location.href);
    u.searchParams.set("partial", partial);
    return u.pathname + u.search;
  }

  function setState(el, state, text) {
    if (!el) return;
    el.dataset.state = state;
    el.textContent = text;
  }

  // Forms that ask before they act (delete).
  document.addEventListener("submit", function (e) {
    const f = e.target;
    if (f.dataset && f.dataset.confirm && !window.confirm(f.dataset.confirm)) e.preventDefault();
  });

  // Jobs page: a phase event of the workspace sets the job's phase in its row at once;
  // a job not shown yet reloads the rows. The list comes from Temporal's visibility
  // store, which may lag the events: the phase each event said is applied again over
  // reloaded rows, so that the table never goes back to an older phase.
  function jobsPage() {
    const table = document.getElementById("jobs");
    if (!table) return;
    const rows = document.getElementById("job-rows");
    const state = document.getElementById("live-state");
    const seen = new Map();
    function apply() {
      for (const [job, phase] of seen) {
        const row = rows.querySelector('tr[data-job="' + CSS.escape(job) + '"]');
        if (!row || row.dataset.phase === phase) continue;
        row.dataset.phase = phase;
        const span = row.querySelector(".phase");
        if (span) { span.textContent = phase; span.className = "phase phase-" + phase.toLowerCase(); }
      }
    }
    const reload = debounce(async function () { await refresh(rows, withPartial("rows")); apply(); }, 250);
    const es = new EventSource(table.dataset.live);
    es.onopen = function () { setState(state, "live", "live"); };
    es.addEventListener("phase", function (e) {
      setState(state, "live", "live");
      const ev = JSON.parse(e.data);
      seen.set(ev.job, ev.phase);
      apply();
      reload();
    });
    es.onerror = function () { setState(state, "reconnecting", "reconnecting…"); };
    // The stream opens on the workspace's first event: until then the page is current.
    setState(state, "live", "live");
  }

  // Job page: phase events reload the status, metric events the charts; logs stream.
  function jobPage() {
    const job = document.getElementById("job");
    if (!job) return;
    const status = document.getElementById("status");
    const charts = document.getElementById("charts");
    const reloadStatus = debounce(function () { refresh(status, withPartial("status")); }, 200);
    // Metric reports may come every few hundred milliseconds: redraw at most every 2 s.
    const reloadCharts = throttle(function () { refresh(charts, job.dataset.charts); }, 2000);
    const es = new EventSource(job.dataset.live);
    es.addEventListener("phase", function () { reloadStatus(); reloadCharts(); });
    es.addEventListener("metric", reloadCharts);
    logs(job.dataset.logs);
  }

  // logs streams the log lines of the chosen replica into #log, filtered by the search
  // box, scrolled to the end while Follow is checked.
  function logs(base) {
    const pre = document.getElementById("log");
    const replica = document.getElementById("log-replica");
    const follow = document.getElementById("log-follow");
    const search = document.getElementById("log-search");
    const state = document.getElementById("log-state");
    let es = null;

    function matches(line) {
      const q = search.value.trim().toLowerCase();
      return q === "" || line.textContent.toLowerCase().includes(q);
    }
    function open() {
      if (es) es.close();
      pre.textContent = "";
      setState(state, "connecting", "connecting…");
      let url = base;
      if (replica.value) url += "?replica=" + encodeURIComponent(replica.value);
      es = new EventSource(url);
      es.addEventListener("log", function (e) {
        const rec = JSON.parse(e.data);
        const line = document.createElement("span");
        line.className = "line" + (rec.stream === "stderr" ? " stderr" : "");
        line.dataset.replica = rec.replica;
        line.textContent = "[" + rec.replica + "] " + rec.line + "\n";
        line.hidden = !matches(line);
        pre.appendChild(line);
        setState(state, "streaming", "streaming");
        if (follow.checked) pre.scrollTop = pre.scrollHeight;
      });
      es.addEventListener("end", function () {
        es.close();
        setState(state, "ended", "the job has ended: every line is shown");
      });
      // A dropped stream would be resumed from its first line by the browser: start
      // over instead, after a second.
      es.onerror = function () {
        es.close();
        setState(state, "reconnecting", "disconnected; reconnecting…");
        setTimeout(open, 1000);
      };
    }
    replica.addEventListener("change", open);
    search.addEventListener("input", function () {
      let shown = 0;
      for (const line of pre.children) { line.hidden = !matches(line); if (!line.hidden) shown++; }
      setState(state, state.dataset.state || "", search.value ? shown + " matching lines" : "");
    });
    follow.addEventListener("change", function () { if (follow.checked) pre.scrollTop = pre.scrollHeight; });
    open();
  }

  // copyButtons copy the text of the element their data-copy names.
  function copyButtons() {
    for (const b of document.querySelectorAll("button[data-copy]")) {
      b.addEventListener("click", async function () {
        const text = document.getElementById(b.dataset.copy).textContent;
        const out = document.getElementById("copy-state");
        try {
          await navigator.clipboard.writeText(text);
          out.textContent = "copied";
        } catch (err) {
          const range = document.createRange();
          range.selectNodeContents(document.getElementById(b.dataset.copy));
          const sel = window.getSelection();
          sel.removeAllRanges();
          sel.addRange(range);
          out.textContent = "selected: press Ctrl+C to copy";
        }
      });
    }
  }

  // Sortable tables: a column's button sorts the rows by that column's data-value,
  // ascending then descending; rows without a value go last.
  function sortableTables() {
    for (const table of document.querySelectorAll("table.sortable")) {
      const body = table.tBodies[0];
      for (const b of table.querySelectorAll("th button[data-sort]")) {
        b.addEventListener("click", function () {
          const col = Number(b.dataset.sort);
          const th = b.parentElement;
          const asc = th.getAttribute("aria-sort") !== "ascending";
          for (const other of table.querySelectorAll("th[aria-sort]")) other.setAttribute("aria-sort", "none");
          th.setAttribute("aria-sort", asc ? "ascending" : "descending");
          const key = function (row) {
            const cell = row.cells[col];
            const v = cell ? (cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent) : "";
            return v.trim();
          };
          const numeric = b.dataset.type === "num" ||
            (b.dataset.type === "auto" && Array.from(body.rows).every(function (r) { const k = key(r); return k === "" || !isNaN(Number(k)); }));
          const rows = Array.from(body.rows);
          rows.sort(function (x, y) {
            const a = key(x), c = key(y);
            if (a === "" && c === "") return 0;
            if (a === "") return 1;
            if (c === "") return -1;
            const d = numeric ? Number(a) - Number(c) : a.localeCompare(c);
            return asc ? d : -d;
          });
          for (const r of rows) body.appendChild(r);
        });
      }
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    jobsPage();
    jobPage();
    sortableTables();
    copyButtons();
    // A form the API refused: its errors take the focus, so that a keyboard or screen
    // reader user hears them first.
    const refused = document.querySelector(".error-box[role=alert]");
    if (refused) refused.focus();
  });
})();
