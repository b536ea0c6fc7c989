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
}
