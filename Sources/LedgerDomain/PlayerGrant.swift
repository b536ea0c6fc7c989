public import Foundation
public import Vocabulary

/// A purchase the ledger granted to a player.
public struct PlayerGrant: Sendable, Equatable {
    public var environment: AppleEnvironment
    public var transactionID: String
    public var orderID: String
    public var grantedAt: Date?

    public init(environment: AppleEnvironment, transactionID: String, orderID: String, grantedAt: Date?) {
        self.environment = environment
        self.transactionID = transactionID
        self.orderID = orderID
        self.grantedAt = grantedAt
    }
}
