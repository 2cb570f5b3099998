/// Media types for file extensions, for uploads that do not name one.
///
/// A fixed table rather than the system's type database, so the same file gets the same type on
/// Linux and on Apple platforms.
enum MIMEType {
    /// The type sent when nothing better is known.
    static let octetStream = "application/octet-stream"

    /// The media type for a file extension (`"png"`, `"JPG"`), or `application/octet-stream`.
    static func forPathExtension(_ pathExtension: String) -> String {
        table[pathExtension.lowercased()] ?? octetStream
    }

    /// The media type for a file name or path (`"holiday.JPG"`, `"/tmp/a.tar.gz"`) by the
    /// extension of its last component; `application/octet-stream` when it has none.
    ///
    /// Worked out here rather than with Foundation's `pathExtension`, which on Linux traps on
    /// some names (a run of slashes around a letter, found by the multipart fuzzer).
    static func forFileName(_ name: String) -> String {
        guard let last = name.split(separator: "/").last,
            let dot = last.lastIndex(of: "."), dot != last.startIndex
        else { return octetStream }
        return forPathExtension(String(last[last.index(after: dot)...]))
    }

    private static let table: [String: String] = [
        "txt": "text/plain; charset=utf-8", "text": "text/plain; charset=utf-8", "md": "text/markdown; charset=utf-8",
        "html": "text/html; charset=utf-8", "htm": "text/html; charset=utf-8", "css": "text/css; charset=utf-8",
        "csv": "text/csv; charset=utf-8", "js": "text/javascript; charset=utf-8", "mjs": "text/javascript; charset=utf-8",
        "json": "application/json", "xml": "application/xml", "yaml": "application/yaml", "yml": "application/yaml",
        "pdf": "application/pdf", "zip": "application/zip", "gz": "application/gzip", "tgz": "application/gzip",
        "tar": "application/x-tar", "bz2": "application/x-bzip2", "xz": "application/x-xz", "7z": "application/x-7z-compressed",
        "wasm": "application/wasm", "rtf": "application/rtf",
        "doc": "application/msword",
        "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls": "application/vnd.ms-excel",
        "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "ppt": "application/vnd.ms-powerpoint",
        "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
        "svg": "image/svg+xml", "heic": "image/heic", "heif": "image/heif", "avif": "image/avif", "bmp": "image/bmp",
        "ico": "image/vnd.microsoft.icon", "tif": "image/tiff", "tiff": "image/tiff",
        "mp3": "audio/mpeg", "m4a": "audio/mp4", "aac": "audio/aac", "wav": "audio/wav", "ogg": "audio/ogg",
        "flac": "audio/flac", "opus": "audio/opus",
        "mp4": "video/mp4", "m4v": "video/mp4", "mov": "video/quicktime", "webm": "video/webm", "mkv": "video/x-matroska",
        "avi": "video/x-msvideo",
        "woff": "font/woff", "woff2": "font/woff2", "ttf": "font/ttf", "otf": "font/otf",
    ]
}
