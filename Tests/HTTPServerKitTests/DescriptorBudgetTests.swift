import Testing

@testable import HTTPServerKit

@Suite("The descriptor budget")
struct DescriptorBudgetTests {
    @Test("the metrics port and the receiver together never hold more than half of a small budget")
    func smallBudget() {
        for budget in [256, 1_024, 2_048, 3_000] {
            let both =
                DescriptorBudget.connections(share: 0.25, of: budget)
                + DescriptorBudget.connections(share: 0.5, of: budget)
            #expect(both <= budget / 2 || both <= 128, "budget \(budget): \(both) connections")
        }
    }

    @Test("a large budget gives each its share, bounded")
    func largeBudget() {
        #expect(DescriptorBudget.connections(share: 0.25, of: 1_048_576) == 65_536)
        #expect(DescriptorBudget.connections(share: 0.5, of: 9_216) == 4_096)
        #expect(DescriptorBudget.connections(share: 0.25, of: 9_216) == 2_048)
    }

    @Test(
        "a million descriptors do not let trickling connections hold gigabytes: connections capped at a memory budget, each at its worst"
    )
    func memoryCap() {
        var limits = HTTPServerLimits()
        limits.maximumBodyBytes = 256 * 1_024
        limits.maximumConnections = DescriptorBudget.connections(share: 0.5, of: 1_048_576)
        limits.maximumConnectionsPerIP = limits.maximumConnections / 4
        #expect(limits.maximumConnections == 65_536)
        limits.capConnections(atMemory: 64 * 1_024 * 1_024)
        #expect(limits.maximumConnections == 204)
        #expect(limits.maximumConnections * limits.worstBytesPerConnection <= 64 * 1_024 * 1_024)
        #expect(limits.maximumConnectionsPerIP == 204)
        // A small descriptor budget stays the lower bound; a huge body never leaves fewer than 64.
        var small = HTTPServerLimits()
        small.maximumBodyBytes = 64 * 1_024
        small.maximumConnections = 100
        small.capConnections(atMemory: 64 * 1_024 * 1_024)
        #expect(small.maximumConnections == 100)
        small.maximumBodyBytes = 64 * 1_024 * 1_024
        small.capConnections(atMemory: 64 * 1_024 * 1_024)
        #expect(small.maximumConnections == 64 && small.maximumConnectionsPerIP == 64)
    }
}
