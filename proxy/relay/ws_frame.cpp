#include "relay/ws_frame.hpp"

#include <algorithm>

namespace tokenmeter::relay::ws {
namespace {

constexpr std::uint8_t fin_bit = 0x80;
constexpr std::uint8_t reserved_mask = 0x70;
constexpr std::uint8_t rsv1 = 0x40;
constexpr std::uint8_t opcode_mask = 0x0F;
constexpr std::uint8_t mask_bit = 0x80;
constexpr std::uint8_t length_mask = 0x7F;
constexpr std::size_t max_control_payload = 125;

bool is_control(std::uint8_t op) noexcept {
    return (op & 0x08U) != 0;
}

bool known_opcode(std::uint8_t op) noexcept {
    return op <= 0x2 || (op >= 0x8 && op <= 0xA);
}

std::string_view trim_spaces(std::string_view s) noexcept {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

bool iequal(std::string_view a, std::string_view b) noexcept {
    return std::ranges::equal(a, b, [](char x, char y) {
        auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
        return lower(x) == lower(y);
    });
}

}  // namespace

std::uint16_t close_code_for(frame_error error) noexcept {
    return error == frame_error::frame_too_big || error == frame_error::message_too_big
               ? close_code::message_too_big
               : close_code::protocol_error;
}

std::string_view to_string(frame_error error) noexcept {
    switch (error) {
        case frame_error::none:
            return "none";
        case frame_error::reserved_bits:
            return "reserved_bits";
        case frame_error::reserved_opcode:
            return "reserved_opcode";
        case frame_error::fragmented_control:
            return "fragmented_control";
        case frame_error::control_too_long:
            return "control_too_long";
        case frame_error::length_too_large:
            return "length_too_large";
        case frame_error::unmasked_client_frame:
            return "unmasked_client_frame";
        case frame_error::masked_server_frame:
            return "masked_server_frame";
        case frame_error::unexpected_continuation:
            return "unexpected_continuation";
        case frame_error::expected_continuation:
            return "expected_continuation";
        case frame_error::frame_after_close:
            return "frame_after_close";
        case frame_error::frame_too_big:
            return "frame_too_big";
        case frame_error::message_too_big:
            return "message_too_big";
    }
    return "unknown";
}

std::size_t frame_reader::header_needed() const noexcept {
    if (header_size_ < 2) {
        return 0;
    }
    const std::uint8_t length7 = header_bytes_[1] & length_mask;
    const std::size_t extended = length7 == 126 ? 2 : length7 == 127 ? 8 : 0;
    const std::size_t mask = (header_bytes_[1] & mask_bit) != 0 ? 4 : 0;
    return 2 + extended + mask;
}

// The checks the first two bytes decide.
frame_error frame_reader::check_first_bytes() const noexcept {
    const std::uint8_t first = header_bytes_[0];
    const std::uint8_t op = first & opcode_mask;
    const std::uint8_t reserved = first & reserved_mask;
    const bool fin = (first & fin_bit) != 0;
    if (close_done_) {
        return frame_error::frame_after_close;
    }
    if (!known_opcode(op)) {
        return frame_error::reserved_opcode;
    }
    if ((reserved & ~limits_.allowed_reserved_bits) != 0) {
        return frame_error::reserved_bits;
    }
    // permessage-deflate sets RSV1 on a message's first frame only (RFC 7692 §6).
    if (reserved != 0 && limits_.allowed_reserved_bits == rsv1 &&
        (is_control(op) || op == static_cast<std::uint8_t>(opcode::continuation))) {
        return frame_error::reserved_bits;
    }
    if (is_control(op)) {
        if (!fin) {
            return frame_error::fragmented_control;
        }
        if ((header_bytes_[1] & length_mask) > max_control_payload) {
            return frame_error::control_too_long;
        }
    }
    const bool masked = (header_bytes_[1] & mask_bit) != 0;
    if (from_ == sender::client && !masked) {
        return frame_error::unmasked_client_frame;
    }
    if (from_ == sender::server && masked) {
        return frame_error::masked_server_frame;
    }
    if (op == static_cast<std::uint8_t>(opcode::continuation) && !in_message_) {
        return frame_error::unexpected_continuation;
    }
    if ((op == static_cast<std::uint8_t>(opcode::text) ||
         op == static_cast<std::uint8_t>(opcode::binary)) &&
        in_message_) {
        return frame_error::expected_continuation;
    }
    return frame_error::none;
}

// The whole header is in: its length and mask, and the size limits.
frame_error frame_reader::begin_frame() noexcept {
    const std::uint8_t first = header_bytes_[0];
    frame_ = frame_header{};
    frame_.fin = (first & fin_bit) != 0;
    frame_.reserved = first & reserved_mask;
    frame_.op = static_cast<opcode>(first & opcode_mask);
    frame_.masked = (header_bytes_[1] & mask_bit) != 0;
    const std::uint8_t length7 = header_bytes_[1] & length_mask;
    std::size_t at = 2;
    if (length7 == 126) {
        frame_.length = (std::uint64_t{header_bytes_[2]} << 8U) | header_bytes_[3];
        at = 4;
    } else if (length7 == 127) {
        for (std::size_t i = 0; i < 8; ++i) {
            frame_.length = (frame_.length << 8U) | header_bytes_[2 + i];
        }
        at = 10;
        if ((frame_.length >> 63U) != 0) {
            return frame_error::length_too_large;
        }
    } else {
        frame_.length = length7;
    }
    if (frame_.masked) {
        std::copy_n(header_bytes_.begin() + static_cast<std::ptrdiff_t>(at), 4,
                    frame_.mask.begin());
    }
    if (frame_.length > limits_.max_frame_bytes) {
        return frame_error::frame_too_big;
    }
    if (frame_.op == opcode::text || frame_.op == opcode::binary) {
        message_op_ = frame_.op;
        message_bytes_ = 0;
    }
    if (!is_control(static_cast<std::uint8_t>(frame_.op))) {
        if (frame_.length >
            limits_.max_message_bytes - std::min(message_bytes_, limits_.max_message_bytes)) {
            return frame_error::message_too_big;
        }
        message_bytes_ += frame_.length;
        in_message_ = !frame_.fin;
    }
    if (frame_.op == opcode::close) {
        close_size_ = 0;
    }
    ++frames_;
    header_size_ = 0;
    in_frame_ = true;
    remaining_ = frame_.length;
    mask_offset_ = 0;
    return frame_error::none;
}

void frame_reader::take_payload(std::string_view bytes) noexcept {
    const bool control = is_control(static_cast<std::uint8_t>(frame_.op));
    if (frame_.op != opcode::close && observer_ == nullptr) {
        mask_offset_ += bytes.size();
        return;
    }
    // Unmasked in pieces through a small scratch: the forwarded bytes stay as they came.
    std::array<char, 512> scratch{};
    while (!bytes.empty()) {
        const std::size_t n = std::min(bytes.size(), scratch.size());
        for (std::size_t i = 0; i < n; ++i) {
            const auto key = frame_.masked ? frame_.mask[(mask_offset_ + i) % 4] : std::uint8_t{0};
            scratch[i] = static_cast<char>(static_cast<std::uint8_t>(bytes[i]) ^ key);
        }
        if (frame_.op == opcode::close) {
            const std::size_t room = close_payload_.size() - close_size_;
            const std::size_t copied = std::min(room, n);
            std::copy_n(scratch.begin(), copied,
                        close_payload_.begin() + static_cast<std::ptrdiff_t>(close_size_));
            close_size_ += copied;
        }
        mask_offset_ += n;
        bytes.remove_prefix(n);
        if (observer_ != nullptr) {
            const bool frame_end = bytes.empty() && mask_offset_ == frame_.length;
            observer_->payload(control ? frame_.op : message_op_,
                               std::string_view(scratch.data(), n), frame_end,
                               frame_end && (control || frame_.fin));
        }
    }
}

frame_error frame_reader::end_frame() noexcept {
    in_frame_ = false;
    if (frame_.length == 0 && observer_ != nullptr) {
        const bool control = is_control(static_cast<std::uint8_t>(frame_.op));
        observer_->payload(control ? frame_.op : message_op_, {}, true, control || frame_.fin);
    }
    if (frame_.op == opcode::close) {
        close_done_ = true;
        // A one-byte payload or an unusable code is the receiver's to refuse (§7.4): the frame
        // is forwarded as it is, and its code noted.
        close_status_ = close_size_ >= 2
                            ? static_cast<std::uint16_t>((std::uint16_t{close_payload_[0]} << 8U) |
                                                         close_payload_[1])
                            : std::uint16_t{1005};
    }
    return frame_error::none;
}

frame_reader::result frame_reader::feed(std::string_view bytes) noexcept {
    if (error_ != frame_error::none) {
        return {0, error_};
    }
    std::size_t pos = 0;
    std::size_t frame_start = 0;
    bool header_began_here = header_size_ == 0 && !in_frame_;
    auto fail = [&](frame_error error) {
        error_ = error;
        // The refused frame is not forwarded: the accepted bytes end where it began, a frame
        // boundary unless its header began in an earlier read (already forwarded).
        if (header_began_here) {
            header_size_ = 0;
            in_frame_ = false;
            remaining_ = 0;
            return result{frame_start, error};
        }
        return result{0, error};
    };
    while (pos < bytes.size()) {
        if (!in_frame_) {
            if (header_size_ == 0) {
                frame_start = pos;
                header_began_here = true;
            }
            header_bytes_[header_size_++] = static_cast<std::uint8_t>(bytes[pos++]);
            if (header_size_ == 2) {
                if (auto error = check_first_bytes(); error != frame_error::none) {
                    return fail(error);
                }
            }
            if (header_size_ < 2 || header_size_ < header_needed()) {
                continue;
            }
            if (auto error = begin_frame(); error != frame_error::none) {
                return fail(error);
            }
            if (remaining_ == 0) {
                (void)end_frame();
            }
            continue;
        }
        const std::size_t take =
            static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, bytes.size() - pos));
        remaining_ -= take;
        take_payload(bytes.substr(pos, take));
        pos += take;
        if (remaining_ == 0) {
            (void)end_frame();
        }
    }
    return {bytes.size(), frame_error::none};
}

std::string close_frame(std::uint16_t code, std::string_view reason, sender as,
                        std::array<std::uint8_t, 4> mask) {
    reason = reason.substr(0, max_control_payload - 2);
    const std::size_t length = 2 + reason.size();
    std::string frame;
    frame.reserve(2 + 4 + length);
    frame.push_back(static_cast<char>(fin_bit | static_cast<std::uint8_t>(opcode::close)));
    const bool masked = as == sender::client;
    frame.push_back(static_cast<char>((masked ? mask_bit : 0U) | length));
    std::string payload;
    payload.push_back(static_cast<char>(code >> 8U));
    payload.push_back(static_cast<char>(code & 0xFFU));
    payload.append(reason);
    if (masked) {
        frame.append(reinterpret_cast<const char*>(mask.data()), mask.size());
        for (std::size_t i = 0; i < payload.size(); ++i) {
            payload[i] = static_cast<char>(static_cast<std::uint8_t>(payload[i]) ^ mask[i % 4]);
        }
    }
    frame.append(payload);
    return frame;
}

std::uint8_t reserved_bits_for_extensions(std::string_view extensions) noexcept {
    std::uint8_t bits = 0;
    while (!extensions.empty()) {
        const auto comma = extensions.find(',');
        std::string_view element = extensions.substr(0, comma);
        element = trim_spaces(element.substr(0, element.find(';')));
        if (!element.empty()) {
            bits |= iequal(element, "permessage-deflate") ? rsv1 : reserved_mask;
        }
        if (comma == std::string_view::npos) {
            break;
        }
        extensions.remove_prefix(comma + 1);
    }
    return bits;
}

}  // namespace tokenmeter::relay::ws
