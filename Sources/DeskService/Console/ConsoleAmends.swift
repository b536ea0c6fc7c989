/// The console's amends after an outage: a lead extends one subscription or every subscriber of a product, and
/// anyone with a support role follows the mass extensions started to their counts. Its script uses the console
/// script's helpers (`call`, `element`, `row`, `fill`, `say`, `roles`) and runs once the session is known.
enum ConsoleAmends {
    static let section = """
            <section id="amends" hidden>
              <h2>Amends after an outage</h2>
              <form id="extend-form" hidden>
                <label>Original transaction id <input id="extend-original" maxlength="64" autocomplete="off"></label>
                <label>or every subscriber of product <input id="extend-product" maxlength="100" autocomplete="off"></label>
                <label>Storefronts (USA,CAN; empty: all) <input id="extend-storefronts" maxlength="800"></label>
                <label>Days <input id="extend-days" type="number" min="1" max="90" value="1" required></label>
                <label>Reason
                  <select id="extend-reason">
                    <option value="service_issue">a service issue or outage</option>
                    <option value="customer_satisfaction">customer satisfaction</option>
                    <option value="other">other</option>
                    <option value="undeclared">undeclared</option>
                  </select>
                </label>
                <button id="extend-submit" type="submit">Extend</button>
              </form>
              <p id="extend-outcome" role="status"></p>
              <table id="extensions">
                <thead><tr><th>Started</th><th>By</th><th>Product</th><th>Days</th><th>Request</th><th>Status</th><th></th></tr></thead>
                <tbody></tbody>
              </table>
            </section>
        """

    static let script = """
        'use strict';

        async function refreshExtensions() {
          const { status, answer } = await call('GET', '/desk/api/extensions');
          if (status !== 200) { return; }
          fill('extensions', (answer.extensions || []).map((started) => {
            const state = document.createElement('span');
            const ask = document.createElement('button');
            ask.type = 'button';
            ask.textContent = 'Status';
            ask.className = 'extension-status';
            ask.dataset.request = started.request_id || '';
            ask.addEventListener('click', async () => {
              const query = new URLSearchParams({ app: started.app || 'default', product_id: started.product_id || '',
                request_id: started.request_id || '', environment: started.environment || 'Production' });
              const { status, answer } = await call('GET', '/desk/api/extensions/status?' + query.toString());
              if (status !== 200) { state.textContent = answer.error || ('refused (' + status + ')'); return; }
              state.textContent = answer.complete
                ? 'done: ' + answer.succeeded_count + ' extended, ' + answer.failed_count + ' not'
                : 'in progress';
            });
            return row([started.at, started.agent_name, started.product_id, started.days, started.request_id, state,
              ask]);
          }));
        }

        // One identifier per request, kept until Apple answers it: pressing Extend again after a timeout sends the
        // same request, never a second extension. Changing the form makes another request.
        let requestID = null;

        async function extend(event) {
          event.preventDefault();
          const original = element('extend-original').value.trim();
          const product = element('extend-product').value.trim();
          if (!original === !product) {
            say('extend-outcome', 'Name one subscription, or a product for all its subscribers: not both.', 'refused');
            return;
          }
          if (product && !window.confirm('Extend every active subscriber of ' + product + '?')) { return; }
          requestID = requestID || (window.crypto.randomUUID ? window.crypto.randomUUID() : null);
          const body = {
            ticket: element('ticket').value.trim(), app: element('app').value,
            days: Number(element('extend-days').value), reason: element('extend-reason').value,
          };
          if (requestID) { body.request_id = requestID; }
          let path = '/desk/api/extend';
          if (product) {
            path = '/desk/api/extend-all';
            body.product_id = product;
            const storefronts = element('extend-storefronts').value.split(',').map((s) => s.trim()).filter((s) => s);
            if (storefronts.length) { body.storefronts = storefronts; }
          } else {
            body.original_transaction_id = original;
          }
          const { status, answer } = await call('POST', path, body);
          if (status === 200 || status === 409) { requestID = null; }
          let text = (answer.outcome || 'refused') + ': ' + (answer.error || '');
          if (answer.outcome === 'extended') { text = 'extended: now ends ' + (answer.expires_at || 'later'); }
          if (answer.outcome === 'started') { text = 'started: request ' + answer.request_id; }
          say('extend-outcome', text, status === 200 ? 'credited' : 'refused');
          await Promise.all([refreshExtensions(), refreshAudit()]);
        }

        document.addEventListener('desk-session', () => {
          element('amends').hidden = false;
          element('extend-form').hidden = !roles.includes('lead');
          element('extend-form').addEventListener('submit', extend);
          element('extend-form').addEventListener('input', () => { requestID = null; });
          refreshExtensions();
        });
        """
}
