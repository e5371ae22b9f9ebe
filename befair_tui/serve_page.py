"""The page `befair serve` gives each browser tab (textual-serve's app_index.html, reworked), and
its plain error page.

textual-serve's own page shows "Session ended." with a Restart button whenever the websocket
closes, which is also what a participant saw when only the server stopped while their session ran
on. This page instead:

- keeps the tab's id in its URL (`tab=`), so a reload or a reconnection is the same tab: the
  server brings back the participant it signed in, without typing anything again;
- on a closed websocket asks the server about this tab (`/tab?tab=ID`): no answer (the server is
  stopping or restarting) shows "Reconnecting…" and asks again every second, and reloads as soon
  as the server is back; a tab whose app stopped on its own says so and offers to open it again.
  It never says "Session ended": the participant's session is a worker that outlives the tab.
"""
from __future__ import annotations

import html

PAGE = r"""<!DOCTYPE html>
<html>
  <head>
    <meta charset="utf-8" />
    <title>{{ application.name }}</title>
    <link rel="stylesheet" href="{{ config.static.url }}css/xterm.css" />
    <script src="{{ config.static.url }}js/textual.js"></script>
    <style>
      body { background: #0c181f; margin: 0; }
      .dialog-container { position: absolute; width: 100vw; height: 100vh; display: flex; align-items: center;
                          justify-content: center; z-index: 10; }
      .shade { position: absolute; width: 100%; height: 100%; background: #0c181f; }
      .intro { width: 640px; min-height: 200px; font-size: 16px; z-index: 20; padding: 16px;
               font-family: "Roboto Mono", menlo, monospace; text-align: center; color: rgba(255, 255, 255, 0.95);
               background-color: #12232d; display: flex; flex-direction: column; align-items: center;
               justify-content: center; margin: 32px; }
      body.-first-byte .intro-dialog { display: none; }
      body .textual-terminal { opacity: 0; transition: opacity 0.3s ease-out; }
      body.-first-byte .textual-terminal { opacity: 1; }
      body.-closed .textual-terminal { opacity: 0.25; }
      .closed-dialog { display: none; }
      body.-closed .closed-dialog { display: flex; }
      button { padding: 12px 28px; background-color: #5e0ba7; color: rgba(255, 255, 255, 0.95); border: none;
               font-family: "Roboto Mono", menlo, monospace; margin: 16px; }
      button:hover { background: #ac5af4; cursor: pointer; }
      #start, #reopen { display: none; }
      #start.-delay, #reopen.-shown { display: block; }
    </style>
  </head>
  <body data-tab="{{ tab }}">
    <div class="dialog-container intro-dialog">
      <div class="shade"></div>
      <div class="intro"><div>{{ application.name }}</div><div>starting…</div>
        <button type="button" id="start" onclick="window.location.reload()">Start</button></div>
    </div>
    <div class="dialog-container closed-dialog">
      <div class="shade"></div>
      <div class="intro"><div id="closed-message">Reconnecting to the server…</div>
        <button type="button" id="reopen" onclick="window.location.replace(tabUrl())">Open again</button></div>
    </div>
    <div id="terminal" class="textual-terminal" data-session-websocket-url="{{ app_websocket_url }}"
         data-font-size="{{ font_size }}"></div>
    <script>
      const TAB = document.body.dataset.tab;
      function tabUrl() {
        const url = new URL(window.location.href);
        url.searchParams.set("tab", TAB);
        return url.pathname + "?" + url.searchParams.toString();
      }
      history.replaceState(null, "", tabUrl());  // a reload is this tab again
      let tries = 0;
      function say(text) { document.getElementById("closed-message").textContent = text; }
      async function reconnect() {
        tries += 1;
        let state = null;
        try {
          const answer = await fetch("/tab?tab=" + encodeURIComponent(TAB), {cache: "no-store"});
          state = (await answer.json()).state;
        } catch (error) {
          state = null;  // no server: it is stopping or restarting
        }
        if (state === "ended") {
          say("This tab's view stopped on its own. Your study session is not affected: open it again.");
          document.getElementById("reopen").classList.add("-shown");
        } else if (state === "unknown") {
          say("The server is back: reconnecting…");
          window.location.replace(tabUrl());
        } else {
          say("Reconnecting to the server… (" + tries + ") Your session goes on; nothing is lost.");
          setTimeout(reconnect, 1000);
        }
      }
      new MutationObserver(() => {
        if (document.body.classList.contains("-closed") && tries === 0) { say("Reconnecting…"); reconnect(); }
      }).observe(document.body, {attributes: true, attributeFilter: ["class"]});
    </script>
  </body>
</html>
"""

ERROR_PAGE = """<!DOCTYPE html>
<html>
  <head>
    <meta charset="utf-8" />
    <title>{title}</title>
    <style>
      body {{ background: #0c181f; color: rgba(255, 255, 255, 0.95); font-family: "Roboto Mono", menlo, monospace;
             display: flex; align-items: center; justify-content: center; height: 100vh; margin: 0; }}
      main {{ background: #12232d; max-width: 640px; padding: 32px; }}
      h1 {{ font-size: 18px; color: #fea62b; }}
      p {{ line-height: 1.5; }}
    </style>
  </head>
  <body>
    <main>
      <h1>{title}</h1>
      <p id="problem">{problem}</p>
      <p id="what-to-do">{what_to_do}</p>
    </main>
  </body>
</html>
"""


def error_page(title: str, problem: str, what_to_do: str) -> str:
    """A plain page saying what is wrong and what to do (no app behind it)."""
    return ERROR_PAGE.format(title=html.escape(title), problem=html.escape(problem),
                             what_to_do=html.escape(what_to_do))
