import Foundation
import Observability
import ReceiptWorker

// receipt-worker: verifies Apple in-app purchases from Kafka jobs (see README.md).
//   receipt-worker run --config FILE [--set key=value]...
//   receipt-worker check-config --config FILE [--set key=value]...
// Exit codes: 0 stopped gracefully / configuration valid; 1 runtime failure; 2 usage or configuration error.

let usage = """
    usage: receipt-worker run --config FILE [--set key=value]...
           receipt-worker check-config --config FILE [--set key=value]...
    """

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data("receipt-worker: \(message)\n".utf8))
    exit(code)
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first, ["run", "check-config"].contains(command) else {
    if arguments.first == "--help" || arguments.first == "-h" || arguments.isEmpty {
        print(usage)
        exit(arguments.isEmpty ? 2 : 0)
    }
    fail("unknown command \(arguments[0])\n\(usage)", code: 2)
}
arguments.removeFirst()
var configFile: String?
var overrides: [String] = []
while !arguments.isEmpty {
    let flag = arguments.removeFirst()
    if flag == "--help" || flag == "-h" {
        print(usage)
        exit(0)
    }
    guard !arguments.isEmpty else { fail("\(flag) needs a value", code: 2) }
    switch flag {
    case "--config": configFile = arguments.removeFirst()
    case "--set": overrides.append(arguments.removeFirst())
    default: fail("unknown option \(flag)\n\(usage)", code: 2)
    }
}

let configuration: WorkerConfiguration
do {
    configuration = try ConfigurationLoader.load(file: configFile, overrides: overrides)
} catch {
    fail("\(error)", code: 2)
}
if command == "check-config" {
    print("configuration is valid")
    exit(0)
}

let logger = Logger(label: "receipt-worker")
let worker: Worker
do {
    worker = try await WorkerAssembly.make(configuration, logger: logger)
} catch let error as ConfigurationError {
    fail("\(error)", code: 2)
} catch {
    fail("\(error)", code: 1)
}
TerminationSignals.install { received in
    logger.notice("signal received; draining", ["signal": received == SIGTERM ? "SIGTERM" : "SIGINT"])
    worker.shutdown()
}
do {
    try await worker.run()
    exit(0)
} catch {
    logger.critical("worker failed", ["error": "\(error)"])
    exit(1)
}
