package import Foundation
package import Vocabulary

/// A purchase's last revoke or reinstate: whether it is revoked, Apple's time of the change, and the share
/// refunded in all while revoked (milliunits; nil when not recorded: rows of releases before shares).
package struct PurchaseState {
    package var revoked: Bool
    package var at: Date
    package var share: Int?

    package init(revoked: Bool, at: Date, share: Int? = nil) {
        self.revoked = revoked
        self.at = at
        self.share = share
    }
}

/// A purchase in its app and environment.
package struct PurchaseKey: Hashable, Sendable {
    package var app: AppScope
    package var environment: AppleEnvironment
    package var purchaseID: PurchaseID

    package init(app: AppScope, environment: AppleEnvironment, purchaseID: PurchaseID) {
        self.app = app
        self.environment = environment
        self.purchaseID = purchaseID
    }

    /// The subscription `originalTransactionID` in this key's app and environment: locked before any of its
    /// periods, by a renewal, a reversal, a tie and support's credit alike.
    package func subscription(_ originalTransactionID: String) -> PurchaseKey {
        PurchaseKey(
            app: app, environment: environment, purchaseID: .subscription(originalTransactionID: originalTransactionID))
    }
}
