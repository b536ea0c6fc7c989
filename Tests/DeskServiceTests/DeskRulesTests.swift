import Foundation
import Kafka
import Synchronization
import Ledger
import Observability
import ReceiptWorker
import Support
import Testing
import Vocabulary

@testable import DeskService

/// The desk's rules of who may do what, in memory and in milliseconds: roles, caps, a lead's decisions, the
/// audit of refusals, and hostile input refused before anything is recorded. What Apple answers is tested end to
/// end (Tests/desk); none of these reaches it.
@Suite("The desk's rules: roles, caps, approvals, the audit")
struct DeskRulesTests {
    let store = InMemoryDeskStore()
    let published = Published()

    func actions(agentDaily: Int = 20, playerDaily: Int = 2) throws -> DeskActions {
        // Apple at a port nothing listens on: none of these rules may call it.
        let configuration = try ConfigurationLoader.build([
            ("apple.bundle_id", "com.example.game"), ("apple.api.key_id", "keyId"), ("apple.api.issuer_id", "issuerId"),
            ("apple.api.private_key_file", Self.keyPath), ("apple.api.production_url", "http://127.0.0.1:9"),
            ("apple.api.sandbox_url", "http://127.0.0.1:9"), ("apple.allow_insecure_urls", "true"),
        ])
        let apps = try SupportDesk.all(
            configuration, ledger: try LedgerEngine.sqlite(path: ":memory:"), logger: Logger(label: "test")
        ).map {
            DeskActions.App(name: $0.name, bundleID: $0.bundleID, desk: $0.desk)
        }
        let published = self.published
        return DeskActions(
            apps: apps, store: store, caps: CreditCaps(agentDaily: agentDaily, playerDaily: playerDaily),
            publish: { event in
                published.add(event)
                throw BrokerAway()
            }, finishTransactions: false, metrics: DeskMetrics(registry: MetricsRegistry()),
            now: { Date(timeIntervalSince1970: 1_800_000_000) })
    }

    static let keyPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("AppleClientTests/testSigningKey.p8").path

    static let ana = Agent(subject: "ana", name: "ana@studio.test", roles: [.agent, .viewer], via: .session)
    static let vic = Agent(subject: "vic", name: "vic@studio.test", roles: [.viewer], via: .bearer)
    static let lee = Agent(subject: "lee", name: "lee@studio.test", roles: [.lead, .agent, .viewer], via: .session)
    static let lou = Agent(subject: "lou", name: "lou@studio.test", roles: [.lead, .agent, .viewer], via: .bearer)

    static func body(_ object: [String: Any]) -> Data { try! JSONSerialization.data(withJSONObject: object) }

    static let credit = body([
        "ticket": "T-100", "transaction_id": "2000000000000001", "order_id": "shop-1", "user_id": "player-77120",
        "reason": "paid, got nothing", "apple_order_id": "MBAA42EX94",
    ])

    static func object(_ answer: DeskActions.Answer) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: answer.body)) as? [String: Any] ?? [:]
    }

    @Test("an erasure the ledger did not answer is audited as failed, naming no one")
    func failedErasureAudited() async throws {
        var desk = try actions()
        desk.erasure = DeskActions.Erasure(
            store: FailingErasureStore(erases: false), key: Array(repeating: 7, count: 32))
        await #expect(throws: FailingErasureStore.Down.self) {
            _ = try await desk.erasePlayer(Self.lee, body: Self.body(["ticket": "GDPR-1", "user_id": "player-77120"]))
        }
        let line = try #require(await store.audit(AuditFilter(action: "erase")).first)
        #expect(line.outcome == "failed" && line.player == nil && line.ticket == "GDPR-1")
        #expect(!line.request.contains("player-77120") && !line.answer.contains("player-77120"))
    }

    @Test("each player of each app has a cap of their own, on a real ledger")
    func playerCaps() async throws {
        let caps = CreditCaps(agentDaily: 10, playerDaily: 1)
        let ledger = try LedgerEngine.sqlite(path: ":memory:")
        for player in ["p1", "p2", "p1/x"] {
            #expect(
                try await ledger.reserveDailyUse(
                    caps.counters(agent: Self.ana, app: "default", player: player), day: "d"))
        }
        #expect(
            try await !ledger.reserveDailyUse(caps.counters(agent: Self.ana, app: "default", player: "p1"), day: "d"))
        #expect(try await ledger.reserveDailyUse(caps.counters(agent: Self.ana, app: "second", player: "p1"), day: "d"))
        await ledger.close()
    }

    @Test("a viewer may look up but not credit: refused, audited, nothing held and no cap taken")
    func viewerCredits() async throws {
        let answer = try await actions().credit(Self.vic, body: Self.credit)
        #expect(answer.status == 403)
        let lines = await store.lines
        #expect(lines.count == 1 && lines[0].outcome == "refused" && lines[0].agent == "vic")
        #expect(lines[0].player == "player-77120" && lines[0].ticket == "T-100")
        #expect(await store.held.isEmpty)
        #expect(await store.used.isEmpty)
        #expect(published.events.isEmpty)
    }

    @Test("past a cap a credit is held for a lead, with nothing but the hold recorded")
    func overTheCap() async throws {
        let answer = try await actions(playerDaily: 0).credit(Self.ana, body: Self.credit)
        #expect(answer.status == 202)
        let object = Self.object(answer)
        #expect(object["outcome"] as? String == "held" && object["approval_id"] as? Int == 1)
        let held = await store.held
        #expect(held.count == 1 && held[0].requestedBy == "ana" && held[0].status == .pending)
        // The request waits as asked: the same credit, the player's proof with it.
        let waiting = try JSONDecoder().decode(CreditForm.self, from: Data(held[0].request.utf8))
        #expect(waiting.transactionID == "2000000000000001" && waiting.appleOrderID == "MBAA42EX94")
        #expect(await store.lines.map(\.outcome) == ["held"])
        #expect(await store.used.isEmpty)
        #expect(published.events.isEmpty)
    }

    @Test("a lead never approves their own held credit; another lead's rejection decides it once")
    func leadsDecide() async throws {
        let desk = try actions(agentDaily: 0)
        #expect(try await desk.credit(Self.lee, body: Self.credit).status == 202)
        let ticket = Self.body(["ticket": "T-100"])
        let own = try await desk.approve(Self.lee, id: 1, body: ticket)
        #expect(own.status == 403)
        #expect(await store.held[0].status == .pending)
        // An agent is no lead.
        #expect(try await desk.approve(Self.ana, id: 1, body: ticket).status == 403)
        let reject = Self.body(["ticket": "T-100", "reason": "duplicate ticket"])
        #expect(try await desk.reject(Self.lou, id: 1, body: reject).status == 200)
        #expect(try await desk.reject(Self.lou, id: 1, body: reject).status == 409)
        #expect(try await desk.approve(Self.lou, id: 1, body: ticket).status == 409)
        #expect(try await desk.approve(Self.lou, id: 99, body: ticket).status == 404)
        let decided = await store.held[0]
        #expect(
            decided.status == .rejected && decided.decision?.by == "lou"
                && decided.decision?.outcome == "duplicate ticket")
        // Every refusal audited: the own approval, the agent's, the decisions after the rejection, the unknown one.
        #expect(
            await store.lines.map(\.outcome) == [
                "held", "refused", "refused", "rejected", "refused", "refused", "refused",
            ])
        #expect(published.events.isEmpty)
    }

    @Test("a lead sees and may reject a credit whose approval stalled, not one being approved now")
    func stalledApprovalsListed() async throws {
        let desk = try actions(playerDaily: 0)
        for _ in 0..<3 { _ = try await desk.credit(Self.ana, body: Self.credit) }
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        func claim(_ id: Int64, secondsAgo: Double) async throws {
            let claimed = ApprovalRequest.Decision(
                status: .approving, by: "lee", byName: "lee@studio.test", at: now.addingTimeInterval(-secondsAgo),
                outcome: "")
            #expect(try await store.decideApproval(id: id, from: .pending, to: claimed))
        }
        try await claim(1, secondsAgo: 600)  // lee's desk stopped ten minutes ago
        try await claim(2, secondsAgo: 10)  // lee's call to Apple in flight
        // lee's desk stopped ten minutes ago too, after the credit's transaction and before its event was out.
        _ = try await desk.credit(Self.ana, body: Self.credit)
        try await claim(4, secondsAgo: 600)
        var recorded = try #require(await store.held[3].decision)
        recorded.outcome = ApprovalRequest.recordedOutcome
        #expect(await store.decideApproval(id: 4, from: .claimed(recorded), to: recorded))
        let listed = Self.object(try await desk.approvalRequests(Self.lou))["approvals"] as? [[String: Any]] ?? []
        #expect(listed.map { $0["id"] as? Int } == [4, 3, 1])
        #expect(listed.map { $0["status"] as? String } == ["approving", "pending", "approving"])
        // The stalled one can be rejected (one that cannot be carried out would otherwise stay for good); the one
        // being approved now cannot, nor the one whose credit is recorded (approved again, it is published).
        let reject = Self.body(["ticket": "T-100", "reason": "cannot be carried out"])
        #expect(try await desk.reject(Self.lou, id: 1, body: reject).status == 200)
        #expect(try await desk.reject(Self.lou, id: 2, body: reject).status == 409)
        let refused = try await desk.reject(Self.lou, id: 4, body: reject)
        #expect(refused.status == 409 && String(decoding: refused.body, as: UTF8.self).contains("approve it again"))
        #expect(await store.held.map(\.status) == [.rejected, .approving, .pending, .approving])
    }

    @Test("hostile input is refused before anything is asked or recorded")
    func hostileInput() async throws {
        let desk = try actions()
        let hostile: [Data] = [
            Data("not json".utf8), Data("[1,2]".utf8), Data(repeating: 0x20, count: 20_000),
            Self.body(["ticket": "T-1", "user_id": "p\u{0}1"]),
            Self.body(["ticket": "T-1", "user_id": "e" + String(repeating: "\u{0301}", count: 40)]),
            Self.body(["ticket": "T-1", "user_id": String(repeating: "x", count: 10_000)]),
            Self.body(["ticket": "<script>", "user_id": "p1"]),
            Self.body(["ticket": "T-1", "user_id": "p1", "transaction_id": "1"]),
            Self.body(["ticket": "T-1", "transaction_id": "1 OR 1=1"]),
            Self.body(["ticket": "T-1", "app_account_token": "not-a-uuid"]),
            Self.body(["ticket": "T-1", "user_id": "p1", "role": "lead"]),
            Self.body(["user_id": "p1"]),
        ]
        for body in hostile {
            await #expect(throws: BadRequest.self) { try await desk.lookup(Self.ana, body: body) }
            await #expect(throws: BadRequest.self) { try await desk.credit(Self.ana, body: body) }
        }
        await #expect(throws: BadRequest.self) {
            try await desk.lookup(Self.ana, body: Self.body(["ticket": "T-1", "user_id": "p1", "app": "another.game"]))
        }
        #expect(await store.lines.isEmpty)
        #expect(await store.held.isEmpty)
        #expect(await store.used.isEmpty)
    }

    @Test("a token without a support role looks up nothing; the refusal is audited under its subject")
    func noRole() async throws {
        let nobody = Agent(subject: "nobody", name: "nobody", roles: [], via: .bearer)
        let answer = try await actions().lookup(nobody, body: Self.body(["ticket": "T-1", "user_id": "p1"]))
        #expect(answer.status == 403)
        #expect(await store.lines.map(\.outcome) == ["refused"])
    }

    @Test("a sign-out ends the session and is audited, without the session's id")
    func signOutAudited() async throws {
        let sessions = try #require(
            ConsoleSessions(store: store, maxAge: 3_600, idle: 1_800, sessionKey: Array(repeating: 7, count: 32)))
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let token = VerifiedToken(
            subject: "ana", name: "ana@studio.test", roles: [.agent, .viewer], expiresAt: .distantFuture, nonce: nil)
        let secret = try await sessions.start(token, now: now)
        let open = try #require(try await sessions.open(secret, now: now))
        let answer = try await actions().signOut(open.agent, sessionID: open.id)
        #expect(answer.status == 200 && Self.object(answer)["outcome"] as? String == "signed out")
        #expect(try await sessions.open(secret, now: now) == nil, "the cookie replayed opens nothing")
        let line = try #require(await store.lines.last)
        #expect((line.agent, line.action, line.outcome) == ("ana", "sign_out", "signed out"))
        #expect(line.answer == #"{"session_ended":true}"#)
        #expect(!line.request.contains(open.id) && !line.answer.contains(open.id) && !line.answer.contains(secret))
    }

    @Test("an agent reads their own audit lines; a lead reads everyone's")
    func auditReading() async throws {
        let desk = try actions(playerDaily: 0)
        _ = try await desk.credit(Self.ana, body: Self.credit)
        _ = try await desk.credit(Self.vic, body: Self.credit)
        let own = Self.object(try await desk.auditLines(Self.ana, query: [:]))["lines"] as? [[String: Any]] ?? []
        #expect(own.map { $0["agent"] as? String } == ["ana"])
        // An agent asking for another's lines still reads only their own.
        let asked =
            Self.object(try await desk.auditLines(Self.ana, query: ["agent": "vic"]))["lines"] as? [[String: Any]]
        #expect(asked?.map { $0["agent"] as? String } == ["ana"])
        let all = Self.object(try await desk.auditLines(Self.lee, query: [:]))["lines"] as? [[String: Any]] ?? []
        #expect(all.count == 2 && all.first?["ticket"] as? String == "T-100")
        await #expect(throws: BadRequest.self) { try await desk.auditLines(Self.lee, query: ["since": "yesterday"]) }
    }
}

/// The desk's store in memory, with the ledger's semantics (all-or-none caps, a decision from one status only, a
/// hold counted and made at once).
actor InMemoryDeskStore: DeskStore {
    var lines: [AuditEntry] = []
    var held: [ApprovalRequest] = []
    var used: [String: Int] = [:]
    var sessions: [DeskSession] = []

    func holdCredit(
        _ request: ApprovalRequest, limit: Int, held line: @Sendable (Int64) -> AuditEntry,
        refused: @Sendable (Int) -> AuditEntry
    ) -> HoldDecision {
        let waiting = held.filter { $0.requestedBy == request.requestedBy && $0.status == .pending }.count
        guard waiting < limit else {
            appendAudit(refused(waiting))
            return .full(waiting: waiting)
        }
        let id = requestApproval(request)
        appendAudit(line(id))
        return .held(id: id)
    }

    func startSession(_ session: DeskSession) { sessions.append(session) }

    /// Reads of a session by id (a cookie no desk made must cost none).
    var sessionReads = 0

    func session(id: String) -> DeskSession? {
        sessionReads += 1
        return sessions.first { $0.id == id }
    }

    func sessionSeen(id: String, at: Date) {
        if let index = sessions.firstIndex(where: { $0.id == id }) { sessions[index].seenAt = at }
    }

    func endSession(id: String, by: String, at: Date) -> Bool {
        guard let index = sessions.firstIndex(where: { $0.id == id && $0.endedAt == nil }) else { return false }
        sessions[index].endedAt = at
        sessions[index].endedBy = by
        return true
    }

    func endSessions(subject: String, by: String, at: Date) -> Int {
        var ended = 0
        for index in sessions.indices where sessions[index].subject == subject && sessions[index].endedAt == nil {
            sessions[index].endedAt = at
            sessions[index].endedBy = by
            ended += 1
        }
        return ended
    }

    func openSessions(now: Date, limit: Int) -> [DeskSession] {
        Array(sessions.filter { $0.endedAt == nil && $0.expiresAt > now }.reversed().prefix(limit))
    }

    @discardableResult
    func appendAudit(_ entry: AuditEntry) -> Int64 {
        var line = entry
        line.id = Int64(lines.count + 1)
        lines.append(line)
        return line.id
    }

    func audit(_ filter: AuditFilter) -> [AuditEntry] {
        let kept = lines.reversed().filter { (line: AuditEntry) -> Bool in
            if let since = filter.since, line.at < since { return false }
            if let agent = filter.agent, line.agent != agent { return false }
            if let player = filter.player, line.player != player { return false }
            if let action = filter.action, line.action != action { return false }
            return true
        }
        return Array(kept.prefix(filter.limit))
    }

    func reserveDailyUse(_ counters: [DailyCounter], day: String) -> Bool {
        guard counters.allSatisfy({ used["\($0.kind)/\($0.who)/\(day)", default: 0] < $0.limit }) else { return false }
        for counter in counters { used["\(counter.kind)/\(counter.who)/\(day)", default: 0] += 1 }
        return true
    }

    func releaseDailyUse(_ counters: [DailyCounter], day: String) {
        for counter in counters { used["\(counter.kind)/\(counter.who)/\(day)", default: 0] -= 1 }
    }

    func dailyUse(_ counter: DailyCounter, day: String) -> Int {
        used["\(counter.kind)/\(counter.who)/\(day)", default: 0]
    }

    func requestApproval(_ request: ApprovalRequest) -> Int64 {
        var held = request
        held.id = Int64(self.held.count + 1)
        self.held.append(held)
        return held.id
    }

    func approvalRequest(id: Int64) -> ApprovalRequest? { held.first { $0.id == id } }

    func approvalRequests(status: ApprovalRequest.Status?, limit: Int) -> [ApprovalRequest] {
        held.reversed().filter { status == nil || $0.status == status }.prefix(limit).map { $0 }
    }

    func decideApproval(id: Int64, from: ApprovalRequest.Precondition, to decision: ApprovalRequest.Decision) -> Bool {
        guard let index = held.firstIndex(where: { $0.id == id }) else { return false }
        let now = held[index]
        switch from {
        case .status(let status): guard now.status == status else { return false }
        case .stalledBefore(let time):
            guard now.status == .approving, (now.decision.map { $0.at < time } ?? true) else { return false }
        case .unrecordedStalledBefore(let time):
            guard now.status == .approving, (now.decision.map { $0.at < time } ?? true), !now.isRecorded else {
                return false
            }
        case .claimed(let claim):
            guard now.status == claim.status, now.decision?.at == claim.at, now.decision?.by == claim.by else {
                return false
            }
        case .claimedUnrecorded(let claim):
            guard now.status == claim.status, now.decision?.at == claim.at, now.decision?.by == claim.by,
                !now.isRecorded
            else { return false }
        }
        var decided = decision
        // A takeover keeps the recorded mark, as the ledger's statement does.
        if now.isRecorded, decision.status == .approving { decided.outcome = ApprovalRequest.recordedOutcome }
        held[index].status = decision.status
        held[index].decision = decided
        return true
    }
}

struct BrokerAway: Error {}

/// What the desk tried to publish.
final class Published: Sendable {
    private let state = Mutex<[StoredEvent]>([])
    var events: [StoredEvent] { state.withLock { $0 } }
    func add(_ event: StoredEvent) { state.withLock { $0.append(event) } }
}
