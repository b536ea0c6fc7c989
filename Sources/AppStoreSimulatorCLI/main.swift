import AppStoreSimulator
import Foundation

// appstore-sim: the App Store simulator as a process.
//   appstore-sim [--host 127.0.0.1] [--port 0] [--threads 2] [--bundle-id com.example] [--shared-secret-file F]
// Prints "listening on http://HOST:PORT" once ready; stops on SIGINT or SIGTERM.

var configuration = AppStoreSimulator.Configuration()
var arguments = Array(CommandLine.arguments.dropFirst()).makeIterator()
func usage(_ message: String) -> Never {
    FileHandle.standardError.write(
        Data(
            "appstore-sim: \(message)\nusage: appstore-sim [--host H] [--port P] [--threads N] [--bundle-id B] [--shared-secret-file F] [--print-test-root]\n"
                .utf8))
    exit(2)
}
while let flag = arguments.next() {
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
