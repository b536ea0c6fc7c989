/// The web console: one page, its script and its style, served by the desk itself (nothing from elsewhere, as
/// the Content-Security-Policy says). The script writes what the API answers with `textContent` only: a player
/// id or a product of hostile bytes stays text.
enum ConsoleAssets {
    static let html = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>Support desk</title>
        <link rel="stylesheet" href="/desk/console.css">
        <script src="/desk/console.js" defer></script>
        <script src="/desk/amends.js" defer></script>
        <script src="/desk/player-data.js" defer></script>
        </head>
        <body>
        <header>
          <h1>Support desk</h1>
          <span id="agent"></span>
          <button id="sign-out" type="button" hidden>Sign out</button>
        </header>
        <main>
          <section id="signed-out" hidden>
            <p>Sign in with the studio's account to answer tickets.</p>
            <p><a id="sign-in" href="/desk/login">Sign in</a></p>
          </section>
          <section id="desk" hidden>
            <form id="lookup-form">
              <h2>Find purchases</h2>
              <label>Ticket <input id="ticket" name="ticket" required maxlength="64" autocomplete="off"></label>
              <label>App <select id="app" name="app"></select></label>
              <label>By
                <select id="lookup-kind">
                  <option value="user_id">player (user id)</option>
                  <option value="transaction_id">transaction id</option>
                  <option value="apple_order_id">order id on the player's invoice</option>
                  <option value="order_id">the game's order id</option>
                  <option value="app_account_token">app account token</option>
                  <option value="history">the customer's history at Apple (any transaction id)</option>
                </select>
              </label>
              <input id="lookup-value" required maxlength="128" autocomplete="off">
              <button id="lookup-submit" type="submit">Look up</button>
            </form>
            <p id="lookup-summary" role="status"></p>
            <table id="purchases">
              <thead><tr><th>Transaction</th><th>Product</th><th>Price</th><th>Purchased</th><th>Case</th><th></th></tr></thead>
              <tbody></tbody>
            </table>
            <form id="credit-form" hidden>
              <h2>Credit a purchase</h2>
              <label>Transaction id <input id="credit-transaction" required></label>
              <label>Order id (the game's) <input id="credit-order" required maxlength="128"></label>
              <label>Player (user id) <input id="credit-user" required maxlength="128"></label>
              <label>Order id on the invoice <input id="credit-apple-order" maxlength="64"></label>
              <label>App account token <input id="credit-token" maxlength="36"></label>
              <label>Reason <input id="credit-reason" required maxlength="500"></label>
              <button id="credit-submit" type="submit">Credit</button>
            </form>
            <p id="credit-outcome" role="status"></p>
            <section id="lead" hidden>
              <h2>Credits held for approval</h2>
              <table id="approvals">
                <thead><tr><th>Id</th><th>Asked by</th><th>Player</th><th>Transaction</th><th>Status</th><th></th></tr></thead>
                <tbody></tbody>
              </table>
              <p id="approval-outcome" role="status"></p>
            </section>
        \(ConsolePlayerData.section)
        \(ConsoleAmends.section)
            <h2 id="audit-title">Recent actions</h2>
            <table id="audit">
              <thead><tr><th>When</th><th>Who</th><th>Role</th><th>Action</th><th>Outcome</th><th>Ticket</th><th>Player</th></tr></thead>
              <tbody></tbody>
            </table>
          </section>
        </main>
        </body>
        </html>
        """

    static let style = """
        [hidden] { display: none !important; }
        body { font: 15px/1.4 system-ui, sans-serif; margin: 0; color: #1d1d1f; background: #fafafa; }
        header { display: flex; gap: 1em; align-items: center; padding: .6em 1.2em; background: #1d3557; color: #fff; }
        header h1 { font-size: 1.2em; margin: 0; flex: 1; }
        main { padding: 1em 1.2em; max-width: 80em; }
        form { display: flex; flex-wrap: wrap; gap: .6em; align-items: end; margin: .6em 0; }
        form h2, section > h2 { width: 100%; font-size: 1.05em; margin: .4em 0 0; }
        label { display: flex; flex-direction: column; font-size: .85em; }
        input, select, button { font: inherit; padding: .3em .5em; }
        table { border-collapse: collapse; width: 100%; margin: .6em 0 1.2em; background: #fff; }
        th, td { text-align: left; padding: .35em .5em; border-bottom: 1px solid #ddd; vertical-align: top; }
        [role=status] { font-weight: 600; }
        .refused { color: #b00020; }
        .held { color: #8a5a00; }
        .credited { color: #006b3c; }
        """

    static let script = """
        'use strict';
        let csrf = null;
        let roles = [];

        function element(id) { return document.getElementById(id); }

        function row(cells) {
          const tr = document.createElement('tr');
          for (const cell of cells) {
            const td = document.createElement('td');
            if (cell instanceof Node) { td.appendChild(cell); } else { td.textContent = cell == null ? '' : String(cell); }
            tr.appendChild(td);
          }
          return tr;
        }

        function fill(tableId, rows) {
          const body = element(tableId).querySelector('tbody');
          body.replaceChildren(...rows);
        }

        async function call(method, path, body) {
          const headers = { 'Accept': 'application/json' };
          if (body !== undefined) { headers['Content-Type'] = 'application/json'; }
          if (method !== 'GET' && csrf) { headers['X-CSRF-Token'] = csrf; }
          const response = await fetch(path, {
            method, headers, credentials: 'same-origin',
            body: body === undefined ? undefined : JSON.stringify(body),
          });
          let answer = {};
          try { answer = await response.json(); } catch (e) { answer = {}; }
          return { status: response.status, answer };
        }

        function say(id, text, kind) {
          const target = element(id);
          target.textContent = text;
          target.className = kind || '';
        }

        async function showSession() {
          const { status, answer } = await call('GET', '/desk/api/session');
          if (status !== 200) {
            element('signed-out').hidden = false;
            element('desk').hidden = true;
            return;
          }
          csrf = answer.csrf_token || null;
          roles = answer.roles || [];
          element('agent').textContent = answer.name + ' (' + roles.join(', ') + ')';
          element('sign-out').hidden = false;
          element('desk').hidden = false;
          element('signed-out').hidden = true;
          element('credit-form').hidden = !roles.includes('agent');
          element('lead').hidden = !roles.includes('lead');
          element('audit-title').textContent = roles.includes('lead') ? 'Audit' : 'Your recent actions';
          const apps = element('app');
          apps.replaceChildren(...(answer.apps || []).map((name) => {
            const option = document.createElement('option');
            option.value = name;
            option.textContent = name;
            return option;
          }));
          await Promise.all([refreshAudit(), refreshApprovals()]);
          document.dispatchEvent(new CustomEvent('desk-session'));
        }

        async function refreshAudit() {
          const { status, answer } = await call('GET', '/desk/api/audit?limit=20');
          if (status !== 200) { return; }
          fill('audit', (answer.lines || []).map((line) => row([
            line.at, line.agent_name + ' (' + line.agent + ')', line.role, line.action, line.outcome, line.ticket,
            line.player,
          ])));
        }

        async function refreshApprovals() {
          if (!roles.includes('lead')) { return; }
          const { status, answer } = await call('GET', '/desk/api/approvals');
          if (status !== 200) { return; }
          fill('approvals', (answer.approvals || []).map((held) => {
            const actions = document.createElement('span');
            // A stalled approval (listed as approving) is approved again, or rejected, as a waiting one is.
            const stalled = held.status === 'approving';
            if (held.status === 'pending' || stalled) {
              for (const verb of ['approve', 'reject']) {
                const button = document.createElement('button');
                button.type = 'button';
                button.textContent = verb === 'reject' ? 'Reject' : stalled ? 'Approve again' : 'Approve';
                button.className = verb;
                button.dataset.id = String(held.id);
                button.addEventListener('click', () => decide(held.id, verb));
                actions.appendChild(button);
              }
            }
            return row([held.id, held.requested_name, held.player, (held.request || {}).transaction_id,
              held.status, actions]);
          }));
        }

        async function decide(id, verb) {
          const ticket = element('ticket').value.trim();
          if (!ticket) { say('approval-outcome', 'Name the ticket first.', 'refused'); return; }
          const body = verb === 'approve' ? { ticket } : { ticket, reason: 'rejected at the console' };
          const { status, answer } = await call('POST', '/desk/api/approvals/' + id + '/' + verb, body);
          let text = (answer.outcome || 'failed') + ': ' + (answer.note || answer.error || '');
          if (answer.unfinished) { text = 'recorded, not finished: ' + answer.unfinished; }
          say('approval-outcome', text, status === 200 ? answer.outcome : 'refused');
          await Promise.all([refreshApprovals(), refreshAudit()]);
        }

        async function lookUp(event) {
          event.preventDefault();
          const kind = element('lookup-kind').value;
          const value = element('lookup-value').value.trim();
          const body = { ticket: element('ticket').value.trim(), app: element('app').value };
          let path = '/desk/api/lookup';
          if (kind === 'history') { path = '/desk/api/history'; body.transaction_id = value; } else { body[kind] = value; }
          const { status, answer } = await call('POST', path, body);
          if (status !== 200) {
            say('lookup-summary', answer.error || ('refused (' + status + ')'), 'refused');
            fill('purchases', []);
            return;
          }
          say('lookup-summary', answer.summary || '', '');
          fill('purchases', (answer.purchases || []).map((purchase) => {
            const credit = document.createElement('button');
            credit.type = 'button';
            credit.textContent = 'Credit…';
            credit.className = 'credit';
            // A purchase an order holds is not credited again: the button is offered for the others only.
            const grant = (purchase.ledger || {}).grant;
            credit.hidden = !roles.includes('agent') || !purchase.verified || (grant && grant.credit !== 'unclaimed');
            credit.addEventListener('click', () => {
              element('credit-transaction').value = purchase.transaction_id || '';
              if (kind === 'user_id') { element('credit-user').value = value; }
              element('credit-order').focus();
            });
            const price = purchase.price == null ? '' : (purchase.price / 1000) + ' ' + (purchase.currency || '');
            return row([purchase.transaction_id, purchase.product_id, price, purchase.purchase_date,
              purchase.verdict, credit]);
          }));
          await refreshAudit();
        }

        async function credit(event) {
          event.preventDefault();
          const body = {
            ticket: element('ticket').value.trim(),
            app: element('app').value,
            transaction_id: element('credit-transaction').value.trim(),
            order_id: element('credit-order').value.trim(),
            user_id: element('credit-user').value.trim(),
            reason: element('credit-reason').value.trim(),
          };
          const appleOrder = element('credit-apple-order').value.trim();
          const token = element('credit-token').value.trim();
          if (appleOrder) { body.apple_order_id = appleOrder; }
          if (token) { body.app_account_token = token; }
          const { status, answer } = await call('POST', '/desk/api/credit', body);
          const outcome = answer.outcome || 'failed';
          let text = outcome + ': ' + (answer.note || answer.error || '');
          if (answer.approval_id) { text += ' (approval ' + answer.approval_id + ')'; }
          if (answer.unfinished) {
            // Recorded, not finished: the same request again finishes it (the same event, outside the caps).
            text = 'recorded, not finished: ' + answer.unfinished + ' Press Credit again.';
          }
          say('credit-outcome', text, status === 200 || status === 202 ? outcome : 'refused');
          await Promise.all([refreshAudit(), refreshApprovals()]);
        }

        async function signOut() {
          const { status, answer } = await call('POST', '/desk/logout', {});
          // A session the desk did not end (the ledger away) is still open: said, not hidden by a reload.
          if (status !== 200 && status !== 401) {
            element('agent').textContent = 'Not signed out: ' + (answer.error || 'status ' + status) + '. Try again.';
            return;
          }
          csrf = null;
          window.location.assign('/desk/');
        }

        document.addEventListener('DOMContentLoaded', () => {
          element('lookup-form').addEventListener('submit', lookUp);
          element('credit-form').addEventListener('submit', credit);
          element('sign-out').addEventListener('click', signOut);
          showSession();
        });
        """
}
