import Foundation
import Vocabulary

/// One of a day's counters: what an agent credited (`kind` agent, `who` the subject), or a player was credited
/// (`kind` player, `who` app and user id).
public struct DailyCounter: Sendable, Equatable {
    public var kind: String
    public var who: String
    public var limit: Int

    public init(kind: String, who: String, limit: Int) {
        self.kind = kind
        self.who = who
        self.limit = limit
    }
}
