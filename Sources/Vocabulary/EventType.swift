/// The `type` of each event the worker publishes on `topics.results`, its CloudEvents `ce_type` (docs/contract.md,
/// "Event types"). Every value is here and nowhere else; the contract's table, the schemas and AsyncAPI follow this
/// type (ContractDocumentTests). A new type is a new case, and a minor release of the contract.
public enum EventType: String, CaseIterable, Sendable {
    // A job's answer.
    case granted = "receipt.granted"
    case denied = "receipt.denied"
    // A purchase's life after its grant.
    case revoked = "receipt.revoked"
    case reinstated = "receipt.reinstated"
    case consumptionRequested = "receipt.consumption_requested"
    // A subscription's.
    case renewed = "receipt.renewed"
    case expired = "receipt.expired"
    case billingIssue = "receipt.billing_issue"
    case renewalChanged = "receipt.renewal_changed"
    case extensionFailed = "receipt.extension_failed"
    // A purchase no job claimed; a parent's withdrawn consent; a mass renewal-date extension done.
    case unclaimed = "receipt.unclaimed"
    case consentRescinded = "receipt.consent_rescinded"
    case extensionCompleted = "receipt.extension_completed"
    // A player erased: grant services erase theirs.
    case playerErased = "player.erased"
}
