/// The console's data request: a lead exports everything the ledger holds about a player as a JSON file to send
/// them. Its script uses the console script's helpers and runs once the session is known.
enum ConsolePlayerData {
    static let section = """
            <form id="export-form" hidden>
              <h2>A player's data</h2>
              <label>Player (user id) <input id="export-user" required maxlength="128" autocomplete="off"></label>
              <button id="export-submit" type="submit">Export</button>
              <button id="erase-submit" type="button">Erase…</button>
              <a id="export-file" hidden>Download</a>
            </form>
            <p id="export-outcome" role="status"></p>
        """

    static let script = """
        'use strict';

        async function exportPlayer(event) {
          event.preventDefault();
          const user = element('export-user').value.trim();
          const body = { ticket: element('ticket').value.trim(), app: element('app').value, user_id: user };
          const { status, answer } = await call('POST', '/desk/api/player/export', body);
          const file = element('export-file');
          if (status !== 200) {
            file.hidden = true;
            say('export-outcome', answer.error || ('refused (' + status + ')'), 'refused');
            return;
          }
          const text = JSON.stringify(answer, null, 2);
          file.href = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
          file.download = 'player-data.json';
          file.hidden = false;
          say('export-outcome', 'exported: ' + (answer.grants || []).length + ' grants, ' +
            (answer.answers || []).length + ' answers, ' + (answer.audit || []).length + ' audit lines', 'credited');
          await refreshAudit();
        }

        async function erasePlayer() {
          const user = element('export-user').value.trim();
          if (!user) { say('export-outcome', 'Name the player first.', 'refused'); return; }
          if (!window.confirm('Erase player ' + user + '? Their identifiers are replaced for good.')) { return; }
          const body = { ticket: element('ticket').value.trim(), app: element('app').value, user_id: user };
          const { status, answer } = await call('POST', '/desk/api/player/erase', body);
          if (status !== 200) {
            say('export-outcome', answer.error || ('refused (' + status + ')'), 'refused');
          } else {
            say('export-outcome', 'erased: the player is ' + answer.pseudonym + ' now', 'credited');
          }
          await refreshAudit();
        }

        document.addEventListener('desk-session', () => {
          element('export-form').hidden = !roles.includes('lead');
          element('export-form').addEventListener('submit', exportPlayer);
          element('erase-submit').addEventListener('click', erasePlayer);
        });
        """
}
