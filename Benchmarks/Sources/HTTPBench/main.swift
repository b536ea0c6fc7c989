import Foundation
import HTTPClient
import Observability
import Synchronization

// HTTP requests per second through HTTPClient with a fixed number in flight, for a fixed time.
//   http-bench --url URL [--body JSON] [--in-flight 1000] [--seconds 5] [--client curl|raw] [--per-host N]
//              [--ca-file PEM]
// Each of the in-flight slots sends its next request as soon as its previous one is answered. `--client raw`
// sends the same POSTs through `RawHTTP1Client` instead (cleartext only): the floor of a client of our own.
// `--per-host N`: the client's connections to the host at once (`http.max_connections_per_host`; 0, the default
// here, is no limit), to measure requests waiting past it. `--ca-file`: the certificate an https URL's server is
// trusted by (`scripts/bench-http.sh` with `TLS=yes`).

func option(_ name: String, _ fallback: String? = nil) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return fallback }
    return arguments[index + 1]
}

guard let url = option("--url") else {
    FileHandle.standardError.write(
        Data("usage: http-bench --url URL [--body JSON] [--in-flight N] [--seconds S]\n".utf8))
    exit(2)
}
let body = option("--body").map { Data($0.utf8) }
let inFlight = Int(option("--in-flight", "1000")!) ?? 1000
let seconds = Double(option("--seconds", "5")!) ?? 5
let raw: RawHTTP1Client?
do {
    raw = option("--client", "curl") == "raw" ? try RawHTTP1Client(url: url) : nil
} catch {
    FileHandle.standardError.write(Data("http-bench: \(error)\n".utf8))
    exit(2)
}
let rawBody = Array(body ?? Data())

final class Counters: Sendable {
    let ok = Atomic<Int>(0)
    let failed = Atomic<Int>(0)
}

var configuration = HTTPClient.Configuration()
configuration.maxConnectionsPerHost = Int(option("--per-host", "0")!) ?? 0
configuration.caFile = option("--ca-file")
let client = HTTPClient(configuration: configuration, logger: Logger(label: "http-bench", minimumLevel: .error))
let counters = Counters()
let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
let started = ContinuousClock.now
await withTaskGroup(of: Void.self) { group in
    for _ in 0..<inFlight {
        group.addTask {
            let request = HTTPRequest(
                method: body == nil ? .get : .post, url: url, headers: [("Content-Type", "application/json")],
                body: body,
                timeout: .seconds(10))
            while ContinuousClock.now < deadline {
                do {
                    let status =
                        if let raw { try await raw.post(rawBody).status } else {
                            try await client.execute(request).status
                        }
                    if status == 200 {
                        counters.ok.add(1, ordering: .relaxed)
                    } else {
                        counters.failed.add(1, ordering: .relaxed)
                    }
                } catch {
                    counters.failed.add(1, ordering: .relaxed)
                }
            }
        }
    }
}
let elapsed = ContinuousClock.now - started
let total = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
// This process's CPU (the client's: its event loop, libcurl, the kernel's share of its sockets) per request.
var usage = rusage()
getrusage(RUSAGE_SELF.rawValue, &usage)
let cpuSeconds =
    Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
    + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
let requests = counters.ok.load(ordering: .relaxed) + counters.failed.load(ordering: .relaxed)
print(
    "\(Int(Double(counters.ok.load(ordering: .relaxed)) / total)) requests/s, \(counters.failed.load(ordering: .relaxed)) failed, "
        + String(format: "client CPU %.1f us per request", cpuSeconds / Double(max(1, requests)) * 1e6)
)
client.shutdown()
