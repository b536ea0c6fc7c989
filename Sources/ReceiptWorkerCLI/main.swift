import Foundation
import Kafka
import Observability
import ReceiptWorker

// receipt-worker: verifies Apple in-app purchases from Kafka jobs (see README.md).
// Exit codes, every subcommand: 0 success (for `run`, a graceful stop); 1 a runtime failure (the broker,
// the ledger); 2 a usage or configuration error, which names the option or key.

let topUsage = """
    usage: receipt-worker <command> [options]

    commands:
      run            consume receipt jobs, verify them with Apple, publish grants and denials
      receive        the App Store notification receiver alone (needs only the broker)
      check-config   validate the configuration without connecting to anything
      enqueue        submit a receipt job (from flags or a JSON file)
      results        follow the results topic, one readable line per event
      dlq replay     send dead letters back to the jobs topic (filters, dry run)
      ledger         migrate the PostgreSQL ledger's schema (or print its SQL); prune stored results;
                     accept a new ledger's offsets; list the support desk's audit
      notifications backfill   produce what Apple's notification history holds for a time range
      consumption answer       answer a refund request (what a grant service produces)
      lookup         a purchase as support asks about it: Apple's view beside the ledger's, and its case
      credit         credit a verified purchase no order holds to an order (support), never a second grant
      extend         move a subscription's renewal date later, or every subscriber's of a product (after an outage)
      player export  everything the ledger holds about a player, as one JSON document (a data request)
      desk           the support desk: a web console and API behind the studio's sign-in, audited

    `receipt-worker <command> --help` describes a command and its options.
    Configuration: --config FILE (key=value), RECEIPT_WORKER_* environment variables, --set key=value.
    Exit codes: 0 success; 1 runtime failure; 2 usage or configuration error.
    """

func fail(_ message: String, code: Int32) -> Never {
    complain("\(message)")
    exit(code)
}

/// One subcommand: its help text and what it does with its arguments.
struct Command {
    let help: String
    let run: ([String]) async throws -> Int32
}

let commands: [String: Command] = [
    "run": Command(help: RunCommand.help, run: { try await RunCommand.run($0) }),
    "receive": Command(help: ReceiveCommand.help, run: { try await ReceiveCommand.run($0) }),
    "check-config": Command(help: CheckConfigCommand.help, run: { try CheckConfigCommand.run($0) }),
    "enqueue": Command(help: EnqueueCommand.help, run: { try await EnqueueCommand.run($0) }),
    "results": Command(help: ResultsCommand.help, run: { try await ResultsCommand.run($0) }),
    "dlq replay": Command(help: DeadLetterReplayCommand.help, run: { try await DeadLetterReplayCommand.run($0) }),
    "ledger": Command(help: LedgerCommand.help, run: { try await LedgerCommand.run($0) }),
    "notifications": Command(help: NotificationsCommand.help, run: { try await NotificationsCommand.run($0) }),
    "consumption": Command(help: ConsumptionCommand.help, run: { try await ConsumptionCommand.run($0) }),
    "lookup": Command(help: LookupCommand.help, run: { try await LookupCommand.run($0) }),
    "credit": Command(help: CreditCommand.help, run: { try await CreditCommand.run($0) }),
    "extend": Command(help: ExtendCommand.help, run: { try await ExtendCommand.run($0) }),
    "player": Command(help: PlayerCommand.help, run: { try await PlayerCommand.run($0) }),
    "desk": Command(help: DeskCommand.help, run: { try await DeskCommand.run($0) }),
]

var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.isEmpty {
    FileHandle.standardError.write(Data((topUsage + "\n").utf8))
    exit(2)
}
if ["--help", "-h", "help"].contains(arguments[0]) {
    print(topUsage)
    exit(0)
}
if ["--version", "version"].contains(arguments[0]) {
    print("receipt-worker \(BuildInfo.version) (\(BuildInfo.revision))")
    exit(0)
}
var name = arguments.removeFirst()
if name == "dlq" {
    if ["--help", "-h"].contains(arguments.first ?? "") {
        print(DeadLetterReplayCommand.help)
        exit(0)
    }
    guard arguments.first == "replay" else { fail("dlq needs a subcommand: dlq replay (see --help)", code: 2) }
    name += " " + arguments.removeFirst()
}
guard let command = commands[name] else { fail("unknown command \(name) (receipt-worker --help lists them)", code: 2) }
if arguments.contains("--help") || arguments.contains("-h") {
    print(command.help)
    exit(0)
}
do {
    exit(try await command.run(arguments))
} catch let error as UsageError {
    // The message says what is wrong; the whole usage text would bury it.
    fail("\(error)\n(receipt-worker \(name) --help for usage)", code: ExitStatus.of(error))
} catch {
    fail("\(error)", code: ExitStatus.of(error))
}
