import AppStoreSimulator
import Foundation

// appstore-sim: the App Store simulator as a process.
//   appstore-sim [--host 127.0.0.1] [--port 0] [--threads 2] [--bundle-id com.example] [--shared-secret-file F]
// Prints "listening on http://HOST:PORT" once ready; stops on SIGINT or SIGTERM.

var configuration = AppStoreSimulator.Configuration()
var arguments = Array(CommandLine.arguments.dropFirst()).makeIterator()
let help = """
    usage: appstore-sim [--host H] [--port P] [--threads N] [--bundle-id B] [--shared-secret-file F]
           appstore-sim --print-test-root | --help

    Apple's verifyReceipt and App Store Server API (Get Transaction Info) on loopback, for tests and demos:
      POST /production/verifyReceipt, /sandbox/verifyReceipt
      GET  /production/inApps/v1/transactions/{id}, /sandbox/inApps/v1/transactions/{id}
    Admin API (JSON):
      POST /admin/purchases {product_id, type, environment, quantity, app_account_token, bundle_id,
           receipt_style, expires_in_seconds, restore_of} -> {transaction_id, receipt, signed_transaction}
      POST /admin/refunds {transaction_id}
      PUT  /admin/faults {latency_ms, latency_jitter_ms, error_rate, error_status, status_21005_rate,
           rate_limit_rate, retry_after_seconds, retry_after_header, garbage_rate, drop_rate,
           outage_start_in_ms, outage_seconds, outage_mode}
      GET  /admin/stats -> requests per endpoint
    Prints "listening on http://HOST:PORT" once ready; stops on SIGINT or SIGTERM.
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
    case "--shared-secret-file":
        guard let secret = try? String(contentsOfFile: value, encoding: .utf8) else { usage("cannot read \(value)") }
        configuration.sharedSecret = secret.trimmingCharacters(in: .whitespacesAndNewlines)
    default: usage("unknown option \(flag)")
    }
}
// Block SIGINT and SIGTERM before any thread starts, so every thread inherits the mask and the signal
// reaches only the sigwait below.
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
