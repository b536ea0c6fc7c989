import AppStoreSimulator
import Foundation

// appstore-sim: the App Store simulator as a process.
//   appstore-sim [--host 127.0.0.1] [--port 0] [--threads 2] [--bundle-id com.example] [--shared-secret-file F]
//                [--app-apple-id 1234567890] [--notification-url URL] [--signing-key-file K --signing-chain-file C]
// Prints "listening on http://HOST:PORT" once ready; stops on SIGINT or SIGTERM.

var configuration = AppStoreSimulator.Configuration()
var arguments = Array(CommandLine.arguments.dropFirst()).makeIterator()
let help = """
    usage: appstore-sim [--host H] [--port P] [--threads N] [--bundle-id B] [--shared-secret-file F]
                        [--app-apple-id N] [--notification-url URL]
                        [--signing-key-file KEY.pem --signing-chain-file CHAIN.pem]
           appstore-sim --print-test-root | --help

    Apple's verifyReceipt, App Store Server API and App Store Server Notifications V2 on loopback, for tests
    and demos:
      POST /production/verifyReceipt, /sandbox/verifyReceipt
      GET  /production/inApps/v1/transactions/{id}, /sandbox/inApps/v1/transactions/{id}
      POST /production/inApps/v1/notifications/history[?paginationToken=T], /sandbox/... (Get Notification
           History: {startDate, endDate, notificationType, notificationSubtype, transactionId, onlyFailures})
      PUT  /production/inApps/v2/transactions/consumption/{id}, /sandbox/... (Send Consumption Information;
           202 when accepted)
    The API endpoints want a bearer token signed with Apple's test key (key id keyId, issuer issuerId).
    Notifications are signed with the test chain (see --print-test-root) and POSTed as {"signedPayload": JWS}
    to the notification URL; an answer other than 200-206, or none, is retried on the configured schedule.

    Options:
      --app-apple-id N        the app's Apple id in every notification's data.appAppleId (default 1234567890)
      --notification-url URL  where notifications are posted (default: none; the admin API can set it)
      --signing-key-file, --signing-chain-file
                              the EC key (PEM) and x5c chain (leaf, intermediate, root; PEM) signing transactions,
                              notifications and statuses (default: Apple's test chain, which names no OCSP
                              responder; a chain that names one tests revocation checks)

    Admin API (JSON):
      POST /admin/purchases {product_id, type, environment, quantity, app_account_token, bundle_id,
           receipt_style, expires_in_seconds, restore_of} -> {transaction_id, receipt, signed_transaction}
      POST /admin/notifications/config {url, retry_delays_ms (default [1000,2000,4000,8000,16000]),
           app_apple_id, history_page_size (default 20)}; GET reads it
      POST /admin/refund {transaction_id, percentage 0-100 (100), reason 0|1 (0)}: revokes the purchase
           (REFUND_FULL or REFUND_PRORATED) and sends REFUND
      POST /admin/refunds {transaction_id}: a full refund (older spelling)
      POST /admin/reverse-refund {transaction_id}: clears the refund, sends REFUND_REVERSED
      POST /admin/revoke {transaction_id}: Family Sharing revocation (FAMILY_REVOKE), sends REVOKE
      POST /admin/consumption-request {transaction_id, reason}: sends CONSUMPTION_REQUEST
      POST /admin/notify {type, subtype, transaction_id, environment}: sends any notification (e.g. TEST)
           Each sender answers {notification_uuid}.
      GET  /admin/notifications -> [{notification_uuid, type, subtype, environment, transaction_id,
           signed_payload, attempts: [{at, status, error}], delivered}]
      GET  /admin/consumption -> [{transaction_id, environment, body, status}] (accepted requests)
      PUT  /admin/faults {latency_ms, latency_jitter_ms, error_rate, error_status, status_21005_rate,
           rate_limit_rate, retry_after_seconds, retry_after_header, garbage_rate, drop_rate,
           outage_start_in_ms, outage_seconds, outage_mode} (Apple's endpoints only)
      GET  /admin/stats -> requests per endpoint
    Prints "listening on http://HOST:PORT" once ready; stops on SIGINT or SIGTERM (deliveries stop too).
    --print-test-root prints the root certificate its signed data chains to (trust it in tests only).
    """
func usage(_ message: String) -> Never {
    FileHandle.standardError.write(Data("appstore-sim: \(message) (appstore-sim --help for usage)\n".utf8))
    exit(2)
}
while let flag = arguments.next() {
    if flag == "--help" || flag == "-h" {
        print(help)
        exit(0)
    }
    if flag == "--print-test-root" {
        print(AppStoreSimulator.testRootPEM)
        exit(0)
    }
    guard let value = arguments.next() else { usage("missing value for \(flag)") }
    switch flag {
    case "--host": configuration.host = value
    case "--port": configuration.port = UInt16(value) ?? { usage("--port takes a port number") }()
    case "--threads": configuration.threads = Int(value) ?? { usage("--threads takes a number") }()
    case "--bundle-id": configuration.bundleID = value
    case "--app-apple-id":
        guard let id = Int64(value), id > 0 else { usage("--app-apple-id takes a positive number") }
        configuration.appAppleID = id
    case "--notification-url":
        guard value.hasPrefix("http://") || value.hasPrefix("https://") else {
            usage("--notification-url takes an http:// or https:// URL")
        }
        configuration.notificationURL = value
    case "--signing-key-file", "--signing-chain-file":
        guard let pem = try? String(contentsOfFile: value, encoding: .utf8) else { usage("cannot read \(value)") }
        if flag == "--signing-key-file" {
            configuration.signingKeyPEM = pem
        } else {
            configuration.signingChainPEM = pem
        }
    case "--shared-secret-file":
        guard let secret = try? String(contentsOfFile: value, encoding: .utf8) else { usage("cannot read \(value)") }
        configuration.sharedSecret = secret.trimmingCharacters(in: .whitespacesAndNewlines)
    default: usage("unknown option \(flag)")
    }
}
// Block SIGINT and SIGTERM before any thread starts, so every thread inherits the mask and the signal
// reaches only the sigwait below.
// A server: a client that closes its socket mid-answer costs that answer an EPIPE, never the process.
signal(SIGPIPE, SIG_IGN)
var stopSignals = sigset_t()
sigemptyset(&stopSignals)
sigaddset(&stopSignals, SIGINT)
sigaddset(&stopSignals, SIGTERM)
pthread_sigmask(SIG_BLOCK, &stopSignals, nil)
do {
    let simulator = try AppStoreSimulator(configuration: configuration)
    simulator.start()
    // Unbuffered: scripts wait for this line.
    FileHandle.standardOutput.write(Data("listening on \(simulator.baseURL)\n".utf8))
    var received: Int32 = 0
    sigwait(&stopSignals, &received)
    simulator.stop()
} catch {
    usage("\(error)")
}
