// core/protobuf_wire: the few pieces of the protobuf wire format (varints, tags, fixed 64-bit
// values and length-delimited fields) that the hand-written encoders need: the Prometheus
// protobuf exposition and the OTLP export. Appends to a string; never reads.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tokenmeter::core::protobuf {

enum wire : std::uint8_t { varint = 0, fixed64 = 1, length_delimited = 2 };

inline void put_varint(std::string& out, std::uint64_t v) {
    while (v >= 0x80) {
        out.push_back(static_cast<char>((v & 0x7f) | 0x80));
        v >>= 7;
    }
    out.push_back(static_cast<char>(v));
}

inline void put_tag(std::string& out, int field, wire type) {
    put_varint(out, (static_cast<std::uint64_t>(field) << 3) | type);
}

inline void put_uint(std::string& out, int field, std::uint64_t v) {
    put_tag(out, field, varint);
    put_varint(out, v);
}

// A signed field of type sint32/sint64 (zigzag).
inline void put_sint(std::string& out, int field, std::int64_t v) {
    put_tag(out, field, varint);
    put_varint(out, (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63));
}

inline void put_fixed64_bits(std::string& out, std::uint64_t bits) {
    for (int i = 0; i < 8; ++i) {
        out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
    }
}

inline void put_fixed64(std::string& out, int field, std::uint64_t v) {
    put_tag(out, field, fixed64);
    put_fixed64_bits(out, v);
}

inline void put_double(std::string& out, int field, double v) {
    put_tag(out, field, fixed64);
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    put_fixed64_bits(out, bits);
}

// A string, bytes or embedded message field.
inline void put_bytes(std::string& out, int field, std::string_view bytes) {
    put_tag(out, field, length_delimited);
    put_varint(out, bytes.size());
    out.append(bytes);
}

}  // namespace tokenmeter::core::protobuf
