@testable import ReceiptWorker
import Testing

/// `ledger rewind-group`'s move of one partition, after a restore: back to what the ledger recorded, and what the
/// topic no longer holds of what the ledger lacks.
@Suite("Rewinding the group to a restored ledger")
struct RewindTests {
    @Test("the group goes back to the ledger's offset while the topic still holds everything after it")
    func backToTheLedger() {
        let rewind = LedgerGroupCheck.Rewind.of(partition: "jobs[0]", committed: 900, recorded: 400, low: 100)
        #expect(rewind == .init(partition: "jobs[0]", committed: 900, recorded: 400, lost: 0))
        #expect(LedgerGroupCheck.Rewind.of(partition: "jobs[0]", committed: 900, recorded: 900, low: 100) == nil)
        // A partition the ledger never recorded, whose first messages are all still there: from offset 0.
        #expect(
            LedgerGroupCheck.Rewind.of(partition: "jobs[1]", committed: 50, recorded: nil, low: 0)
                == .init(partition: "jobs[1]", committed: 50, recorded: 0, lost: 0))
    }

    @Test(
        "a backup older than the topic's retention: the jobs it lacks that are gone are counted, the move stops at the first kept"
    )
    func pastRetention() {
        // Recorded 100, the topic keeps from 300: 200 decisions the ledger lacks are gone for good.
        #expect(
            LedgerGroupCheck.Rewind.of(partition: "jobs[0]", committed: 900, recorded: 100, low: 300)
                == .init(partition: "jobs[0]", committed: 900, recorded: 300, lost: 200))
        // A partition the ledger never recorded, the topic keeping from 20: the 20 before are gone.
        #expect(
            LedgerGroupCheck.Rewind.of(partition: "jobs[1]", committed: 50, recorded: nil, low: 20)
                == .init(partition: "jobs[1]", committed: 50, recorded: 20, lost: 20))
        // The group committed less than what the topic keeps (it was idle): all it lacks is gone, nothing moves.
        #expect(
            LedgerGroupCheck.Rewind.of(partition: "jobs[0]", committed: 250, recorded: 100, low: 300)
                == .init(partition: "jobs[0]", committed: 250, recorded: 250, lost: 150))
    }
}
