public import Foundation
import NIOConcurrencyHelpers
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a client keeps access tokens, by label (a service's `@TokenLabel`).
///
/// Storages are shared by every concurrent request of a client, so they must be safe to call
/// from any task. Trellis reads the token before each protected request; keep `fetch` cheap.
public protocol AccessTokenStorage: Sendable {
    /// Stores `token` under `label`, replacing any token stored there.
    func store(_ token: AccessToken, for label: String) async throws
    /// The token stored under `label`, if any.
    func fetch(for label: String) async throws -> AccessToken?
    /// Removes the token stored under `label`; removing a missing token is not an error.
    func delete(for label: String) async throws
}

/// Keeps tokens in memory for the life of the process: the default storage.
public final class InMemoryAccessTokenStorage: AccessTokenStorage {
    private let tokens: NIOLockedValueBox<[String: AccessToken]>

    /// An empty storage, or one holding `tokens`.
    public init(_ tokens: [String: AccessToken] = [:]) {
        self.tokens = NIOLockedValueBox(tokens)
    }

    public func store(_ token: AccessToken, for label: String) async throws {
        tokens.withLockedValue { $0[label] = token }
    }

    public func fetch(for label: String) async throws -> AccessToken? {
        tokens.withLockedValue { $0[label] }
    }

    public func delete(for label: String) async throws {
        tokens.withLockedValue { $0[label] = nil }
    }
}

/// A failure to read or write a token storage.
public struct AccessTokenStorageError: Error, Sendable, CustomStringConvertible {
    /// Where the storage keeps its tokens (a file path, a keychain service).
    public let location: String
    /// What went wrong.
    public let reason: String

    /// A failure of the storage at `location`, for `reason`.
    public init(location: String, reason: String) {
        self.location = location
        self.reason = reason
    }

    public var description: String { "access token storage \(location): \(reason)" }
}

/// Keeps tokens in a JSON file readable by the owner alone (mode 0600), so that a login
/// survives a restart of a server or command-line tool.
///
/// Every change rewrites the file atomically: the new contents go to a temporary file created
/// with mode 0600 in the same directory, which is then renamed over the old one, so a crash
/// leaves either the old file or the new one, never a torn one, and the tokens are never
/// readable by others in between. The file is read once; later reads come from memory, so
/// only this storage should write it.
public final class FileAccessTokenStorage: AccessTokenStorage {
    /// The file the tokens are kept in.
    public let fileURL: URL
    private let cache = NIOLockedValueBox<[String: AccessToken]?>(nil)

    /// A storage in `fileURL`; the file and its directory are created on the first store.
    public init(fileURL: URL) {
        self.fileURL = fileURL
    }

    public func store(_ token: AccessToken, for label: String) async throws {
        try update { $0[label] = token }
    }

    public func fetch(for label: String) async throws -> AccessToken? {
        try cache.withLockedValue { cached in
            if cached == nil { cached = try load() }
            return cached?[label]
        }
    }

    public func delete(for label: String) async throws {
        try update { $0[label] = nil }
    }

    // Tokens are a few hundred bytes and change rarely (login, refresh), so the file is
    // written synchronously under the lock: concurrent writers are serialised and a reader
    // never sees a half-applied change.
    private func update(_ change: (inout [String: AccessToken]) -> Void) throws {
        try cache.withLockedValue { cached in
            var tokens = try cached ?? load()
            change(&tokens)
            try write(tokens)
            cached = tokens
        }
    }

    private func load() throws -> [String: AccessToken] {
        let data: Data
        do {
            data = try Data(contentsOf: fileURL)
        } catch CocoaError.fileReadNoSuchFile {
            return [:]
        } catch {
            if !FileManager.default.fileExists(atPath: fileURL.path) { return [:] }
            throw AccessTokenStorageError(location: fileURL.path, reason: "cannot be read: \(error)")
        }
        do {
            return try JSONDecoder().decode([String: AccessToken].self, from: data)
        } catch {
            throw AccessTokenStorageError(location: fileURL.path, reason: "is not a token file Trellis wrote: \(error)")
        }
    }

    private func write(_ tokens: [String: AccessToken]) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(tokens)
        let directory = fileURL.deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw AccessTokenStorageError(location: directory.path, reason: "the directory cannot be created: \(error)")
        }
        let temporaryPath = directory.appendingPathComponent(".\(fileURL.lastPathComponent).\(UUID().uuidString).tmp").path
        let descriptor = open(temporaryPath, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else {
            throw AccessTokenStorageError(location: temporaryPath, reason: "cannot be created: \(String(cString: strerror(errno)))")
        }
        var failure: String?
        do {
            try FileHandle(fileDescriptor: descriptor, closeOnDealloc: false).write(contentsOf: data)
        } catch {
            failure = "\(error)"
        }
        if failure == nil, fsync(descriptor) != 0 { failure = String(cString: strerror(errno)) }
        close(descriptor)
        if failure == nil, rename(temporaryPath, fileURL.path) != 0 { failure = String(cString: strerror(errno)) }
        if let failure {
            unlink(temporaryPath)
            throw AccessTokenStorageError(location: fileURL.path, reason: "cannot be written: \(failure)")
        }
    }
}
