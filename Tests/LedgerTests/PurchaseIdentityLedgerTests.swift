import CSQLite
import Foundation
import Ledger
import TestSupport
import Testing
import Vocabulary

@Suite("The ledger claims purchases, not transaction ids", .timeLimit(.minutes(1)))
struct PurchaseIdentityLedgerTests {
    let event = Data(#"{"decision":"grant","event_id":"e1"}"#.utf8)

    @Test(
        "a restore (new transaction id, same purchase) is never granted to a second order",
        arguments: Backend.allCases)
    func restore(backend: Backend) async throws {
        let ledger = try await backend.open()
        let first = LedgerClaim.grant(orderID: "o1", transactionID: "100", purchaseID: .transaction("100"))
        #expect(try await ledger.record(jobID: "j1", claim: first, event: event) == .recorded)
        // The same non-consumable restored on another device: transaction 200, original 100.
        let restoredElsewhere = LedgerClaim.grant(orderID: "o2", transactionID: "200", purchaseID: .transaction("100"))
        #expect(try await ledger.record(jobID: "j2", claim: restoredElsewhere, event: event) == .duplicateTransaction)
        // Presented again for the order that holds it: not a second grant of that order.
        let restoredSameOrder = LedgerClaim.grant(orderID: "o1", transactionID: "200", purchaseID: .transaction("100"))
        #expect(try await ledger.record(jobID: "j3", claim: restoredSameOrder, event: event) == .orderAlreadyFulfilled)
        // The original transaction for its own order, as a new job: the same grant (the same event id follows).
        #expect(try await ledger.record(jobID: "j4", claim: first, event: event) == .recorded)
        // A billing period is its own purchase: two periods, two orders.
        let period1 = LedgerClaim.grant(
            orderID: "s1", transactionID: "300", purchaseID: .billingPeriod(webOrderLineItemID: "9001"))
        let period2 = LedgerClaim.grant(
            orderID: "s2", transactionID: "301", purchaseID: .billingPeriod(webOrderLineItemID: "9002"))
        let period1Again = LedgerClaim.grant(
            orderID: "s3", transactionID: "302", purchaseID: .billingPeriod(webOrderLineItemID: "9001"))
        #expect(try await ledger.record(jobID: "j5", claim: period1, event: event) == .recorded)
        #expect(try await ledger.record(jobID: "j6", claim: period2, event: event) == .recorded)
        #expect(try await ledger.record(jobID: "j7", claim: period1Again, event: event) == .duplicateTransaction)
        await ledger.close()
    }

    @Test(
        "two spellings of one accented order id are two orders: the second is duplicate_transaction",
        arguments: Backend.allCases)
    func unicodeEquivalentOrders(backend: Backend) async throws {
        let ledger = try await backend.open()
        let composed = "caf\u{E9}-order"
        let decomposed = "cafe\u{301}-order"
        #expect(composed == decomposed)  // equal to Swift, not to the database
        let first = LedgerClaim.grant(orderID: composed, transactionID: "500")
        let second = LedgerClaim.grant(orderID: decomposed, transactionID: "500")
        #expect(try await ledger.record(jobID: "j1", claim: first, event: event) == .recorded)
        #expect(try await ledger.record(jobID: "j2", claim: second, event: event) == .duplicateTransaction)
        await ledger.close()
    }

    @Test("two replicas racing to grant one purchase under two transaction ids: one grant")
    func restoreRace() async throws {
        let url = try makePostgresDatabase()
        let first = try await LedgerFactory.open(url: url, poolSize: 4)
        let second = try await LedgerFactory.open(url: url, poolSize: 4)
        let outcomes = try await withThrowingTaskGroup(of: Outcome.self) { group in
            for purchase in 0..<50 {
                for (side, ledger) in [("a", first), ("b", second)] {
                    group.addTask {
                        let claim = LedgerClaim.grant(
                            orderID: "\(side)-\(purchase)", transactionID: "\(side)\(purchase)",
                            purchaseID: .transaction("p\(purchase)"))
                        return try await recordRetrying(
                            ledger, jobID: "\(side)-\(purchase)", claim: claim, event: event)
                    }
                }
            }
            return try await group.reduce(into: [Outcome]()) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == .recorded }.count == 50)
        #expect(outcomes.filter { $0 == .duplicateTransaction }.count == 50)
        await first.close()
        await second.close()
    }

    @Test("a value PostgreSQL refuses for good is a permanent error, not a conflict retried forever")
    func permanentError() async throws {
        let ledger = try await LedgerFactory.open(url: try makePostgresDatabase(), poolSize: 2)
        // An index row of this size is past PostgreSQL's limit (program_limit_exceeded, class 54).
        let huge = (0..<12_000).map { _ in String(UInt32.random(in: 0...UInt32.max), radix: 36) }.joined()
        do {
            _ = try await ledger.record(jobID: huge, claim: .deny, event: event)
            Issue.record("recorded")
        } catch let error as LedgerError {
            #expect(error.isPermanent, "\(error)")
        }
        #expect(try await ledger.record(jobID: "fine", claim: .deny, event: event) == .recorded)
        await ledger.close()
    }
}

@Suite("The ledger's health check tells the truth", .timeLimit(.minutes(1)))
struct LedgerHealthTests {
    @Test("a SQLite ledger whose file is deleted or replaced refuses decisions and fails its health check")
    func sqliteFileReplaced() async throws {
        for replace in [false, true] {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("health-\(UUID()).sqlite").path
            let ledger = try await LedgerFactory.open(url: "sqlite:\(path)")
            try await ledger.ping()
            try FileManager.default.removeItem(atPath: path)
            if replace { #expect(FileManager.default.createFile(atPath: path, contents: Data())) }
            await #expect(throws: LedgerError.self) { try await ledger.ping() }
            await #expect(throws: LedgerError.self) {
                try await ledger.record(jobID: "j", claim: .grant(orderID: "o", transactionID: "1"), event: Data())
            }
            await ledger.close()
        }
    }

    @Test("a SQLite ledger locked by another process fails its health check")
    func sqliteLocked() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("locked-\(UUID()).sqlite").path
        let ledger = try await LedgerFactory.open(url: "sqlite:\(path)")
        var other: OpaquePointer?
        #expect(sqlite3_open(path, &other) == SQLITE_OK)
        #expect(sqlite3_exec(other, "BEGIN EXCLUSIVE", nil, nil, nil) == SQLITE_OK)
        // busy_timeout is 5 s: the check fails after it.
        await #expect(throws: LedgerError.self) { try await ledger.ping() }
        sqlite3_exec(other, "ROLLBACK", nil, nil, nil)
        sqlite3_close(other)
        try await ledger.ping()
        await ledger.close()
    }

    @Test("a read-only PostgreSQL (a standby after failover) fails the health check")
    func postgresReadOnly() async throws {
        let url = try makePostgresDatabase()
        let database = String(url[url.index(after: url.lastIndex(of: "/")!)...])
        let ledger = try await LedgerFactory.open(url: url, poolSize: 2)
        try await ledger.ping()
        #expect(runPsql(url, "ALTER DATABASE \(database) SET default_transaction_read_only = on") == 0)
        // Sessions opened from now on are read-only; drop every session of the database (the pool's, and behind
        // PgBouncer its server connections too) so it reconnects: from another database's session.
        let server = String(url[..<url.lastIndex(of: "/")!]) + "/postgres"
        #expect(
            runPsql(
                server, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(database)'") == 0)
        var failed = false
        for _ in 0..<5 where !failed {
            do { try await ledger.ping() } catch { failed = "\(error)".contains("read-only") }
        }
        #expect(failed)
        await ledger.close()
    }
}

@Suite("PostgreSQL connections beyond the server's limit", .timeLimit(.minutes(1)))
struct ConnectionLimitTests {
    @Test(
        "a replica that cannot connect (the role's limit is reached) waits and starts once one is free; a full pool still answers"
    )
    func waitsForAConnection() async throws {
        let url = try makePostgresDatabase()
        let role = "limited_\(UUID().uuidString.prefix(8).lowercased())"
        let database = String(url[url.index(after: url.lastIndex(of: "/")!)...])
        // Not a superuser (superusers ignore connection limits); owning the database lets it create the schema.
        #expect(runPsql(url, "CREATE ROLE \(role) LOGIN CONNECTION LIMIT 1") == 0)
        #expect(runPsql(url, "ALTER DATABASE \(database) OWNER TO \(role)") == 0)
        let limited = url.replacingOccurrences(of: "://postgres@", with: "://\(role)@")
        // Pool of 4, one connection allowed: the others fail to open, calls share the one that exists.
        let first = try await LedgerFactory.open(url: limited, poolSize: 4)
        async let answers = withThrowingTaskGroup(of: Outcome.self) { group in
            for index in 0..<20 {
                group.addTask {
                    try await recordRetrying(first, jobID: "j\(index)", claim: .deny, event: Data(), attempts: 50)
                }
            }
            return try await group.reduce(into: [Outcome]()) { $0.append($1) }
        }
        #expect(try await answers.allSatisfy { $0 == .recorded })
        // A second replica starts while the limit is taken: it waits instead of failing. It connects through a
        // proxy that counts its connections: a second one is the replica trying again after it was refused.
        let proxy = try CountingProxy(databaseURL: limited)
        defer { proxy.stop() }
        let opening = Task { try await LedgerFactory.open(url: proxy.url, poolSize: 2) }
        #expect(
            await eventually(timeout: .seconds(30)) { proxy.connections >= 2 },
            "the second replica did not try again: \(proxy.connections) connection(s)")
        // The first replica's connection ends (terminated, then closed): its slot frees once, and the waiting
        // replica's new connection is never among those terminated (in the other order it could be).
        _ = runPsql(
            url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '\(role)' AND datname = '\(database)'"
        )
        await first.close()
        let second = try await opening.value
        #expect(try await second.record(jobID: "later", claim: .deny, event: Data()) == .recorded)
        await second.close()
    }
}

/// A TCP proxy (a Python process, on a free loopback port) in front of the test's PostgreSQL that counts the
/// connections made through it.
private final class CountingProxy: Sendable {
    let url: String
    private let pid: pid_t
    private let count: String

    private static let script = """
        import asyncio, os, sys
        target, status = int(sys.argv[1]), sys.argv[2]
        made = 0

        async def pipe(reader, writer):
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

        async def handle(client_reader, client_writer):
            global made
            made += 1
            with open(status + ".part", "w") as f:
                f.write(f"{made}\\n")
            os.replace(status + ".part", status)
            try:
                server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target)
            except OSError:
                client_writer.close()
                return
            await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))

        async def main():
            server = await asyncio.start_server(handle, "127.0.0.1", 0)
            print(server.sockets[0].getsockname()[1], flush=True)
            async with server:
                await server.serve_forever()

        asyncio.run(main())
        """

    init(databaseURL: String) throws {
        let slash = databaseURL.lastIndex(of: "/")!
        let server = databaseURL[..<slash]
        let database = databaseURL[databaseURL.index(after: slash)...]
        let port = server[server.index(after: server.lastIndex(of: ":")!)...]
        let user = server[server.index(server.firstIndex(of: "/")!, offsetBy: 2)..<server.firstIndex(of: "@")!]
        let directory = FileManager.default.temporaryDirectory.path
        let name = "counting-proxy-\(UUID().uuidString)"
        let script = "\(directory)/\(name).py"
        let output = "\(directory)/\(name).out"
        count = "\(directory)/\(name).count"
        try Self.script.write(toFile: script, atomically: true, encoding: .utf8)
        let command = "exec python3 '\(script)' \(port) '\(count)' > '\(output)' < /dev/null"
        guard let spawned = spawn(["/bin/bash", "-c", command]) else {
            throw TestSupportError("cannot start the counting proxy")
        }
        pid = spawned
        var listening: String?
        for _ in 0..<400 where listening == nil {  // ten seconds: processes start slowly beside other tests
            usleep(25_000)
            listening = (try? String(contentsOfFile: output, encoding: .utf8))?.split(separator: "\n").first.map(
                String.init)
        }
        guard let listening else {
            kill(spawned, SIGKILL)
            var status: Int32 = 0
            waitpid(spawned, &status, 0)
            throw TestSupportError("the counting proxy did not start")
        }
        url = "postgresql://\(user)@127.0.0.1:\(listening)/\(database)?sslmode=disable"
    }

    /// Connections made through it so far.
    var connections: Int {
        Int(
            (try? String(contentsOfFile: count, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        )
            ?? 0
    }

    func stop() {
        // SIGKILL: a process spawned from a thread of Swift's pool inherits its blocked signals, SIGTERM among
        // them; the proxy holds nothing to flush.
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }
}
