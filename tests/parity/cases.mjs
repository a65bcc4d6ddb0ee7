// cases.mjs: the short, hand-picked parity cases (each a boundary of some pre-tokenizer rule or a
// byte-level corner), and the invalid UTF-8 cases. The longer texts are files in corpus/.
// Code points are written as escapes where the character is invisible or easy to mistype.

const nbsp = "\u00a0";
const ideographic = "\u3000";
const zwj = "\u200d";
const crlf = "\r\n";

function repeat(s, n) {
  return s.repeat(n);
}

// [name, text] pairs; names are unique and stable (they appear in failure reports).
const raw = [
  // Empty and single characters.
  ["empty", ""],
  ["one_space", " "],
  ["one_letter", "a"],
  ["one_digit", "7"],
  ["one_newline", "\n"],
  ["one_tab", "\t"],
  ["one_cr", "\r"],
  ["nul", "a\u0000b"],
  ["controls", "\u0001\u0002\u0007\u0008\u000b\u000c\u001b[31mred\u001b[0m\u007f"],
  ["c1_controls", "\u0080\u0085\u009f"],
  // Whitespace runs: the "\s+(?!\S)" rule and its neighbours.
  ["spaces_2", "a  b"],
  ["spaces_3_before_word", "a   b"],
  ["spaces_trailing", "word   "],
  ["spaces_leading", "   word"],
  ["spaces_only_17", repeat(" ", 17)],
  ["spaces_only_1000", repeat(" ", 1000)],
  ["tabs_run", "x\t\t\t\ty"],
  ["tab_space_mix", "if x:\n\t  \t return 1\n"],
  ["newlines_run", "a\n\n\n\nb"],
  ["newlines_only_64", repeat("\n", 64)],
  ["space_newline_mix", "a \n \n  \n   b"],
  ["crlf_lines", `one${crlf}two${crlf}${crlf}three${crlf}`],
  ["crlf_run", repeat(crlf, 20)],
  ["cr_only_lines", "old\rmac\rlines\r"],
  ["lf_cr_mix", "\n\r\n\r\r\n\n"],
  ["indent_code", "def f():\n    if x:\n        return [\n            1,\n        ]\n"],
  ["spaces_before_punct", "x    = 1;    // note"],
  ["space_then_newline_then_word", "end  \nstart"],
  ["trailing_newline_spaces", "line\n    "],
  // Contractions, in every case.
  ["contractions_lower", "it's they'll we've I'm you'd she's can't won't isn't"],
  ["contractions_upper", "IT'S THEY'LL WE'VE I'M YOU'D SHE'S CAN'T WON'T"],
  ["contractions_mixed_case", "It'S tHey'Ll We'Ve i'M You'D"],
  ["contractions_alone", "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D"],
  ["contraction_runs", "'s's's'll'll've"],
  ["apostrophe_variants", "it’s it‘s it`s it´s it's"],
  ["possessives", "James's the Joneses' O'Neill's rock'n'roll"],
  // Digits.
  ["digits_1_to_10", "1 12 123 1234 12345 123456 1234567 12345678 123456789 1234567890"],
  ["long_number", "31415926535897932384626433832795028841971693993751058209749445923078164062862"],
  ["number_formats", "1,234,567.89 1.234.567,89 1 234 567 0.5 .5 5. -0 +1 1e10 1E-10 0x1F 0b1010 0o17"],
  ["digits_letters", "abc123def4567ghi89 A1B2C3 v1.2.3-rc.4 sha256:0f3a"],
  ["other_digits", "٠١٢٣٤٥٦٧٨٩ ۰۱۲۳۴۵۶۷۸۹ ०१२३४५६७८९ ๐๑๒๓๔๕๖๗๘๙ ０１２３４５６７８９ ①②③ ⅠⅡⅢⅣ ½ ¾ ²³"],
  ["dates_times", "2024-11-14T06:42:00.123Z 14/11/2024 11:59:59 PM 23:59"],
  // Special-token text appearing as plain text (counted as ordinary text).
  ["special_endoftext", "<|endoftext|>"],
  ["special_in_sentence", "The model wrote <|endoftext|> in the middle of a sentence."],
  ["special_llama3", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"],
  ["special_chatml", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>assistant\n"],
  ["special_llama2_gemma", "<s>[INST] hi [/INST] ok</s> <bos><start_of_turn>user\nhi<end_of_turn>\n<eos><pad><unk>"],
  ["special_fim", "<|fim_prefix|>def f(<|fim_suffix|>)<|fim_middle|>x<|endofprompt|>"],
  ["special_partial", "<|endoftext <|endoftext| |endoftext|> <|end|of|text|> <||>"],
  ["special_repeated", repeat("<|endoftext|>", 12)],
  // Unusual whitespace.
  ["nbsp", `a${nbsp}b${nbsp}${nbsp}c ${nbsp} d`],
  ["ideographic_space", `日本${ideographic}語${ideographic}${ideographic}です`],
  ["unicode_spaces", "a\u2000b\u2001c\u2002d\u2003e\u2004f\u2005g\u2006h\u2007i\u2008j\u2009k\u200al\u202fm\u205fn"],
  ["line_para_separators", "one\u2028two\u2029three\u0085four"],
  ["zero_width", "zero\u200bwidth\u200cnon\u200djoiner\u2060word\ufeffjoiner"],
  ["bom_start", "\ufeffstarts with a byte order mark"],
  ["vertical_tab_form_feed", "a\u000bb\u000cc\u000b\u000c\n"],
  ["mixed_unicode_ws_run", `x ${nbsp}\t${ideographic}\u2003\n y`],
  // Combining characters and normalization (Qwen3 applies NFC first).
  ["combining_acute", "cafe\u0301 re\u0301sume\u0301 nai\u0308ve"],
  ["precomposed_vs_decomposed", "\u00e9 e\u0301 \u00c5 A\u030a \u212b \u1e69 s\u0323\u0307 s\u0307\u0323"],
  ["combining_stack", "Z\u0351\u0352\u0357a\u0364\u0365\u0366l\u0300\u0301\u0302\u0303\u0304g\u0316\u0317o\u0318\u0319"],
  ["combining_alone", "\u0301\u0302 \u0303 x\u20dd \u20e3"],
  ["hangul_jamo_decomposed", "\u1112\u1161\u11ab\u1100\u1173\u11af"],
  ["hangul_precomposed", "한글"],
  ["devanagari_marks", "क्षि ज्ञा श्री क़ ड़ क\u093c\u094d"],
  ["thai_marks", "น้ำ ก่ ก้ ก๊ ก๋ ที่นี่"],
  ["arabic_harakat", "بِسْمِ ٱللَّٰهِ"],
  ["canonical_order", "a\u0323\u0302 a\u0302\u0323 q\u0307\u0323"],
  ["compatibility_chars", "ﬁ ﬂ ㎞ ™ ℃ Ⅻ ｶﾀｶﾅ ①"],
  // Emoji.
  ["emoji_simple", "🙂😀😂🎉🚀"],
  ["emoji_skin_tones", "👍👍🏻👍🏼👍🏽👍🏾👍🏿 👋🏽 🧑🏿‍💻"],
  ["emoji_zwj_family", `👨${zwj}👩${zwj}👧${zwj}👦 👩${zwj}❤️${zwj}💋${zwj}👨`],
  ["emoji_flags", "🇮🇪🇯🇵🇧🇷🇺🇳🇪🇺 🏴󠁧󠁢󠁳󠁣󠁴󠁿 🏳️‍🌈 🏴‍☠️"],
  ["emoji_keycaps", "1️⃣ #️⃣ *️⃣ 🔟"],
  ["emoji_variation", "☺ ☺️ ❤ ❤️ ✔ ✔️ ©️ ®️"],
  ["emoji_in_text", "Shipped it 🚀🚀🚀 (finally!) 👏🏾 — thanks team 🙏"],
  ["emoji_run_long", repeat("🦀", 200)],
  // Scripts side by side.
  ["mixed_scripts_words", "Hello世界Привет مرحبا नमस्ते สวัสดี 안녕하세요 こんにちは"],
  ["mixed_scripts_tight", "abcабвαβγ中文한글ไทย"],
  ["latin_with_cjk_punct", "他说：“OK，let's go！”（笑）"],
  ["math_symbols", "∀x∈ℝ: x²≥0 ∧ ∑ᵢ aᵢ ≤ ∞ ≠ ≈ √2 ∫₀¹ f(x)dx → ⊥"],
  ["box_drawing", "┌──┬──┐\n│ab│cd│\n└──┴──┘"],
  ["punct_runs", "!!! ??? ... --- === *** ~~~ ### $$$ %%% &&& ||| ;;; ::: ,,, ''' \"\"\" ``` ///"],
  ["punct_newline", "end.\n\n---\n\n...\r\n"],
  ["url_email", "https://user:pw@example.org:8443/a/b?c=d&e=f#g mailto:someone@example.co.uk"],
  ["path_windows", "C:\\Users\\Public\\Documents\\report (final) v2.docx"],
  ["very_long_word", repeat("abcdefghij", 300)],
  ["very_long_punct", repeat("=-", 500)],
  ["very_long_cjk", repeat("潮汐記録", 250)],
  ["astral_chars", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐛𝐨𝐥𝐝 𓀀𓀁 𠀀𠀁 🀄 🂡"],
  ["private_use", "\ue000\uf8ff\u{f0000}\u{10fffd}"],
  ["noncharacters", "\ufdd0\ufffe\uffff\u{1fffe}"],
  ["replacement_char", "before\ufffdafter \ufffd\ufffd"],
  ["upper_lower_titlecase", "ǅ ǈ ǋ ǲ ᾈ ᾘ ᾨ Ǆ ǆ"],
  ["modifier_letters", "ʰʲʷ ˈ ˌ ː ᵃ ᵇ ꜟ"],
  // Case-insensitive contractions under Unicode case folding: U+017F LONG S folds to "s",
  // U+212A KELVIN SIGN to "k"; fullwidth letters do not fold to ASCII.
  ["contractions_case_folding", "it'\u017f he'\u017fll THEY'\u017f\u017f it'\uff33 o'\u212a \u212aelvin's"],
  ["apostrophe_then_mark", "it'\u0301s we'\u0308ll"],
  // Characters assigned in recent Unicode versions (15.0, 15.1, 16.0): letters and digits that
  // an older Unicode table would not know (pre-tokenizer classes differ), in running text.
  ["unicode_15_kawi", "ok \u{11f04}\u{11f05}\u{11f12} \u{11f50}\u{11f51}\u{11f52} end"],
  ["unicode_15_cjk_ext_h", "漢字\u{31350}\u{31351}\u{3138a} text"],
  ["unicode_15_1_cjk_ext_i", "x\u{2ebf0}\u{2ebf1}\u{2ec5d}y"],
  ["unicode_16_scripts", "Garay \u{10d50}\u{10d51}\u{10d70} digits \u{10d40}\u{10d41}; Todhri \u{105c0}\u{105c1}; Kirat Rai \u{16d43}\u{16d44} \u{16d70}\u{16d71}"],
  ["unicode_16_outlined_digits", "n=\u{1ccf0}\u{1ccf1}\u{1ccf2}\u{1ccf3}4567"],
  ["unassigned_code_points", "a\u{2fffd}b\u{e0080}c\u{10fff0}d\u0378e"],
  ["mongolian_vowel_separator", "a\u180eb \u180e c"],
  // Text that looks like vocabulary internals: SentencePiece's U+2581 (Gemma 3 has added tokens
  // for runs of it), byte-fallback token names, GPT-2 byte-level stand-ins (Ġ, Ċ).
  ["literal_metaspace", "a\u2581\u2581b \u2581 \u2581\u2581\u2581\u2581\u2581x\u2581"],
  ["byte_token_names", "<0x0A> <0xFF><0x00> <unk> ĠHello Ċ ĊĊ âĢĻ"],
  // Added-token flags (the flags_* fixtures in fixtures.mjs have tokens with each): lstrip and
  // rstrip over ASCII and Unicode whitespace, single_word next to word characters of several
  // scripts, leftmost-longest overlaps, tokens that start with whitespace after an rstrip token,
  // normalized tokens in the segments between the others, and prepends after every token.
  ["added_lstrip", `a  <l>b \t<l> <l>${nbsp}<l>${ideographic}<l><l>  `],
  ["added_rstrip", "<r>  x<r>\n\ny <r>\t\u2003z<r>"],
  ["added_lstrip_rstrip", "  <lr>  <lr><lr>   end <lr>\n <l> <r> <lr>"],
  ["added_single_word", "<sw> a<sw> <sw>b (<sw>) <sw>_ 9<sw> word words sword word. _word word_ 1word éword wordé"],
  ["added_single_word_scripts", "日word word日 \u0301word word\u0301 ١word ‿word word‍ word"],
  ["added_overlap", "<abc> <ab <abc <ab> <abcd> <<abc>> <ab<abc>"],
  ["added_rstrip_then_space_token", "<|end   \n\n\nx <|end\n\n<|end> <|end\n\n\n\n"],
  ["added_unicode_single_word", "éé aéé éé. ééé  éé ééé éé"],
  ["added_normalized", "hello hellothere the other the. <n>  <n>x  hello<n>hello <|im_start|>user\nhi"],
  ["added_normalized_inside", "<|im_start|>user hello<r>the <l>the<sw>the word<n>word"],
  ["added_segment_prepends", "<|im_start|>a<|im_end|> b <|im_start|> <|im_start|>\n<|im_end|>"],
  ["added_only", "<r>"],
  ["added_space_only", " <l> "],
];

export function shortCases() {
  const seen = new Set();
  return raw.map(([name, text]) => {
    if (seen.has(name)) {
      throw new Error(`duplicate case name ${name}`);
    }
    seen.add(name);
    return { name: `case/${name}`, text };
  });
}

// Byte strings that are not valid UTF-8. The references take JS strings, so what they can
// express of these is the text a WHATWG/Unicode-conformant decoder makes of the bytes (one U+FFFD
// per maximal ill-formed subpart); generate.mjs records both the bytes and that text.
const invalid = [
  ["lone_continuation", [0x61, 0x80, 0x62]],
  ["lone_lead_2", [0x61, 0xc3, 0x62]],
  ["truncated_3", [0x61, 0xe2, 0x82, 0x62]],
  ["truncated_4", [0xf0, 0x9f, 0x98]],
  ["truncated_at_end", [0x68, 0x69, 0x20, 0xe4, 0xb8]],
  ["overlong_slash", [0x2f, 0xc0, 0xaf, 0x2f]],
  ["overlong_nul", [0xc0, 0x80]],
  ["surrogate_encoded", [0x61, 0xed, 0xa0, 0x80, 0x62]],
  ["above_max", [0xf4, 0x90, 0x80, 0x80]],
  ["byte_ff_fe", [0xff, 0xfe, 0x20, 0x41]],
  ["latin1_text", Array.from("caf\u00e9 na\u00efve", (c) => c.charCodeAt(0))],
  ["invalid_between_words", [...Buffer.from("hello "), 0xff, ...Buffer.from(" world")]],
  ["invalid_in_spaces", [0x20, 0x20, 0x80, 0x20, 0x20]],
  ["invalid_then_emoji", [0xe2, 0x28, 0xa1, ...Buffer.from("🙂")]],
  ["all_high_bytes", Array.from({ length: 128 }, (_, i) => 0x80 + i)],
];

export function invalidUtf8Cases() {
  return invalid.map(([name, bytes]) => ({ name: `invalid/${name}`, bytes: Uint8Array.from(bytes) }));
}

// A sweep over the code space: every 4th code point of the BMP and every 96th above it
// (surrogates excluded), each in a context that exercises the pre-tokenizers' classes (letter,
// digit, mark, whitespace, punctuation): "<c>a<c>1 <c><c>'s ". Cut into cases of 512 code
// points named by their range, so a difference in Unicode tables (a newly assigned letter or
// digit) shows up as the range that holds it. Checked one-shot and in one random chunking.
export function sweepCases() {
  const points = [];
  for (let cp = 0x20; cp <= 0x10ffff; cp += cp < 0x10000 ? 4 : 96) {
    if (cp >= 0xd800 && cp <= 0xdfff) {
      continue;
    }
    points.push(cp);
  }
  const cases = [];
  for (let i = 0; i < points.length; i += 512) {
    const part = points.slice(i, i + 512);
    const hex = (cp) => cp.toString(16).toUpperCase().padStart(4, "0");
    const text = part
      .map((cp) => {
        const c = String.fromCodePoint(cp);
        return `${c}a${c}1 ${c}${c}'s `;
      })
      .join("");
    cases.push({ name: `sweep/U+${hex(part[0])}..U+${hex(part[part.length - 1])}`, text });
  }
  return cases;
}
