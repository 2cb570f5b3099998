import Crypto
import Foundation
import NIOCore

/// Entries as files in a folder: `<SHA-256 of the key>.entry`, each the entry's head as JSON
/// after its length, then the body. Every file operation runs off the cooperative pool
/// (``FileIO/blocking(_:)``).
final class DiskCacheStore: CacheStore {
    private let directory: String
    private let capacity: Int
    private static let magic = Array("TRC1".utf8)

    init(directory: URL, capacity: Int) throws {
        self.directory = directory.path
        self.capacity = capacity
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw TrellisError.fileFailed(FileFailure(path: directory.path, operation: "create", reason: "\(error)"))
        }
    }

    private func path(for key: String) -> String {
        let name = HTTPCache.hex(SHA256.hash(data: Data(key.utf8)))
        return directory + "/" + name + ".entry"
    }

    func read(_ key: String) async -> (CachedResponse, ByteBuffer)? {
        let path = path(for: key)
        return try? await FileIO.blocking {
            guard let data = FileManager.default.contents(atPath: path) else { return nil }
            guard let entry = Self.decode(data) else {
                // Cut short or damaged: refused, and removed so that it is not read again.
                FileIO.remove(path)
                return nil
            }
            // Recently used: the eviction goes by modification time.
            try? FileManager.default.setAttributes([.modificationDate: Date()], ofItemAtPath: path)
            return entry
        }
    }

    func write(_ key: String, _ entry: CachedResponse, body: ByteBuffer) async {
        let path = path(for: key)
        guard let head = try? JSONEncoder().encode(entry) else { return }
        var data = Data(Self.magic)
        withUnsafeBytes(of: UInt32(head.count).bigEndian) { data.append(contentsOf: $0) }
        data.append(head)
        data.append(contentsOf: body.readableBytesView)
        let directory = directory
        let capacity = capacity
        let file = data
        _ = try? await FileIO.blocking {
            try FileIO.replaceAtomically(path, with: file)
            Self.evict(in: directory, toFit: capacity)
        }
    }

    func remove(_ key: String) async {
        let path = path(for: key)
        _ = try? await FileIO.blocking { FileIO.remove(path) }
    }

    func removeAll() async {
        let directory = directory
        _ = try? await FileIO.blocking {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where name.hasSuffix(".entry") {
                FileIO.remove(directory + "/" + name)
            }
        }
    }

    /// The entry in `data`, or `nil` when it is not a whole entry whose body matches its digest.
    private static func decode(_ data: Data) -> (CachedResponse, ByteBuffer)? {
        guard data.count >= 8, Array(data.prefix(4)) == magic else { return nil }
        let headLength = data.dropFirst(4).prefix(4).reduce(0) { $0 << 8 | Int($1) }
        guard data.count >= 8 + headLength,
            let entry = try? JSONDecoder().decode(CachedResponse.self, from: data.dropFirst(8).prefix(headLength))
        else { return nil }
        let body = ByteBuffer(data: data.dropFirst(8 + headLength))
        guard body.readableBytes == entry.bodyLength, HTTPCache.digest(body) == entry.bodyDigest else { return nil }
        return (entry, body)
    }

    /// Removes the least recently used entries until the folder holds at most `capacity` bytes.
    private static func evict(in directory: String, toFit capacity: Int) {
        let manager = FileManager.default
        let names = ((try? manager.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".entry") }
        var files = names.compactMap { name -> (path: String, size: Int, used: Date)? in
            let path = directory + "/" + name
            guard let attributes = try? manager.attributesOfItem(atPath: path),
                let size = (attributes[.size] as? NSNumber)?.intValue,
                let used = attributes[.modificationDate] as? Date
            else { return nil }
            return (path, size, used)
        }
        var total = files.reduce(0) { $0 + $1.size }
        files.sort { $0.used < $1.used }
        for file in files where total > capacity {
            FileIO.remove(file.path)
            total -= file.size
        }
    }
}
