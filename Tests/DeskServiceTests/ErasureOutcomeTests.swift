import Foundation
import Ledger
import Support
import Testing
import Vocabulary

/// A ledger that fails an erasure: at once (`erases` false: nothing erased), or after it committed (`erases`: its
/// record cannot be read back, nor its event marked published).
struct FailingErasureStore: ErasureStore {
    struct Down: Error {}
    let erases: Bool

    func erase(
        _ userID: String, app: AppScope, appName: String, bundleID: String, by: String, dryRun: Bool,
        pseudonym: @escaping @Sendable (PlayerErasure.Kind, String) -> String,
        digest: @escaping @Sendable (String) -> String
    ) async throws -> (ErasureCounts, pseudonym: String) {
        guard erases else { throw Down() }
        var counts = ErasureCounts()
        counts.grants = 2
        return (counts, pseudonym(.user, userID))
    }

    func erasureRecord(app: AppScope, pseudonym: String) async throws -> ErasureRecord? { throw Down() }
    func markErasurePublished(app: AppScope, pseudonym: String, at: Date) async throws { throw Down() }
}

/// What an erasure answers when the ledger fails at the wrong moment: a player erased is always said erased, with
/// the event that tells grant services, so a ledger that fails after its commit never hides an erasure.
@Suite("A player's erasure when the ledger fails after its commit")
struct ErasureOutcomeTests {
    @Test("erased, its record not read back: said erased, with its player.erased event")
    func recordUnreadable() async throws {
        let key = try #require(PlayerData.ErasureKey(Array(repeating: 7, count: 32)))
        let app = PlayerData.App(scope: .defaultApp, name: "default", bundleID: "com.example")
        let outcome = try await PlayerData.erase(
            userID: "player-9", app: app, key: key, ledger: FailingErasureStore(erases: true), by: "lou", dryRun: false)
        guard case .erased(let counts, let pseudonym, let event?) = outcome else {
            Issue.record("not said erased with its event: \(outcome)")
            return
        }
        #expect(counts.grants == 2 && pseudonym.hasPrefix("erased-"))
        let json = String(decoding: event.json, as: UTF8.self)
        #expect(event.type == "player.erased" && json.contains(pseudonym) && json.contains("player-9"))
        // A dry run that cannot read whether the player was erased before says so, rather than guess.
        await #expect(throws: FailingErasureStore.Down.self) {
            _ = try await PlayerData.erase(
                userID: "player-9", app: app, key: key, ledger: FailingErasureStore(erases: true), by: "lou",
                dryRun: true)
        }
    }
}
