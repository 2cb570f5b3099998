import Foundation

extension HTTPStatusFailure {
    /// What the status means for a keyed call, or for a call the server wanted keyed, as the
    /// idempotency-key draft gives it.
    var idempotencyMeaning: String? {
        switch (status.code, idempotencyKey) {
        case (409, let key?):
            "the first request with idempotency key \(key) was still in progress when the call's wait for it ran out"
        case (422, let key?):
            "with an idempotency key, 422 means the key \(key) was used before for a different request: a new operation needs a new key"
        case (400, nil) where String(decoding: body, as: UTF8.self).lowercased().contains("idempotency"):
            "the server asks for an idempotency key: key the call (Request.idempotencyKey, @IdempotencyKey, or the client's idempotencyKeys)"
        default:
            nil
        }
    }
}
