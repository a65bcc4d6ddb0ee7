// outbound/redis_protocol: the commands, the verdicts on replies, the loggable error word and the
// reconnect backoff.
#include "outbound/redis_protocol.hpp"

#include <gtest/gtest.h>

#include <string>

namespace tokenmeter::outbound {
namespace {

resp::value parse_one(std::string_view bytes) {
    resp::parser p;
    p.feed(bytes);
    EXPECT_TRUE(p.has_reply()) << bytes;
    return p.take_reply();
}

TEST(RedisProtocol, AuthWithAndWithoutAUser) {
    EXPECT_EQ(auth_command("", "pw"), "*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n");
    EXPECT_EQ(auth_command("meter", "pw"), "*3\r\n$4\r\nAUTH\r\n$5\r\nmeter\r\n$2\r\npw\r\n");
}

TEST(RedisProtocol, ScriptCallsAreEvalshaThenEval) {
    observe::shared_call call;
    call.key = "tm:{a}:tokens";
    call.rate = 10;
    call.capacity = 20;
    call.cost = 5;
    call.admit = true;
    const resp::value sha = parse_one(script_command(call, "abc123", false, "17"));
    ASSERT_EQ(sha.members.size(), 9U);
    EXPECT_EQ(sha.members[0].text, "EVALSHA");
    EXPECT_EQ(sha.members[1].text, "abc123");
    EXPECT_EQ(sha.members[2].text, "1");
    EXPECT_EQ(sha.members[3].text, "tm:{a}:tokens");
    EXPECT_EQ(sha.members[7].text, "1");
    EXPECT_EQ(sha.members[8].text, "17") << "the tag the reply must carry back";
    const resp::value eval = parse_one(script_command(call, "abc123", true, "18"));
    EXPECT_EQ(eval.members[0].text, "EVAL");
    EXPECT_EQ(eval.members[1].text, observe::shared_limit_script());
}

TEST(RedisProtocol, AuthAndProbeVerdicts) {
    EXPECT_EQ(read_auth_reply(parse_one("+OK\r\n")), auth_verdict::accepted);
    EXPECT_EQ(read_auth_reply(parse_one("-WRONGPASS invalid\r\n")), auth_verdict::refused);
    EXPECT_EQ(read_auth_reply(parse_one(":1\r\n")), auth_verdict::wrong_type);
    EXPECT_EQ(read_auth_reply(parse_one("+QUEUED\r\n")), auth_verdict::wrong_type);
    EXPECT_TRUE(probe_in_step(parse_one("$4\r\nab12\r\n"), "ab12"));
    EXPECT_TRUE(probe_in_step(parse_one("-NOPERM no ping for you\r\n"), "ab12"));
    EXPECT_FALSE(probe_in_step(parse_one("+OK\r\n"), "ab12")) << "a greeting";
    EXPECT_FALSE(probe_in_step(parse_one("+PONG\r\n"), "ab12"));
    EXPECT_FALSE(probe_in_step(parse_one("$4\r\nzz99\r\n"), "ab12"));
}

TEST(RedisProtocol, ScriptOutcomes) {
    const script_outcome ok =
        read_script_outcome(parse_one("*3\r\n:1\r\n$4\r\n12.5\r\n$2\r\n17\r\n"), "17");
    EXPECT_EQ(ok.reply.failure, observe::store_failure::none);
    EXPECT_TRUE(ok.reply.admitted);
    EXPECT_DOUBLE_EQ(ok.reply.level, 12.5);
    EXPECT_FALSE(ok.out_of_step);
    const script_outcome late =
        read_script_outcome(parse_one("*3\r\n:1\r\n$4\r\n12.5\r\n$2\r\n16\r\n"), "17");
    EXPECT_TRUE(late.out_of_step) << "another call's reply";
    EXPECT_EQ(late.reply.failure, observe::store_failure::reply);
    const script_outcome noscript =
        read_script_outcome(parse_one("-NOSCRIPT No matching\r\n"), "17");
    EXPECT_TRUE(noscript.noscript);
    EXPECT_EQ(noscript.reply.failure, observe::store_failure::script);
    EXPECT_FALSE(read_script_outcome(parse_one("-ERR NOSCRIPT\r\n"), "17").noscript);
    for (const char* wrong :
         {":1\r\n", "+OK\r\n", "$-1\r\n", "*1\r\n:1\r\n", "*2\r\n:1\r\n$4\r\n12.5\r\n",
          "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$2\r\n17\r\n", "*3\r\n:2\r\n$1\r\n1\r\n$2\r\n17\r\n",
          "*3\r\n:1\r\n$3\r\nnan\r\n$2\r\n17\r\n", "*3\r\n:1\r\n$1\r\n1\r\n:17\r\n"}) {
        const script_outcome o = read_script_outcome(parse_one(wrong), "17");
        EXPECT_EQ(o.reply.failure, observe::store_failure::reply) << wrong;
        EXPECT_FALSE(o.out_of_step) << wrong;
    }
}

TEST(RedisProtocol, OnlyAPlainUppercaseCodeIsLogged) {
    EXPECT_EQ(error_code_word("WRONGPASS invalid username-password pair hunter2"), "WRONGPASS");
    EXPECT_EQ(error_code_word("NOAUTH Authentication required."), "NOAUTH");
    EXPECT_EQ(error_code_word("ERR"), "ERR");
    EXPECT_EQ(error_code_word("hunter2 is wrong"), "");
    EXPECT_EQ(error_code_word("Err mixed case"), "");
    EXPECT_EQ(error_code_word("WRONG-PASS x"), "");
    EXPECT_EQ(error_code_word(""), "");
    EXPECT_EQ(error_code_word(" ERR leading space"), "");
    EXPECT_EQ(error_code_word(std::string(33, 'A')), "");
    EXPECT_EQ(error_code_word(std::string(32, 'A')), std::string(32, 'A'));
}

TEST(RedisProtocol, BackoffDoublesToTheCapWithFullJitter) {
    using std::chrono::milliseconds;
    reconnect_backoff b(milliseconds(100), milliseconds(10'000), 42);
    const long long ceilings[] = {100, 200, 400, 800, 1600, 3200, 6400, 10'000, 10'000, 10'000};
    for (long long ceiling : ceilings) {
        EXPECT_EQ(b.ceiling().count(), ceiling);
        const milliseconds wait = b.next();
        EXPECT_GE(wait.count(), 0);
        EXPECT_LE(wait.count(), ceiling);
    }
    b.reset();
    EXPECT_EQ(b.ceiling().count(), 100);
    // Full jitter: the waits under one ceiling spread over all of it.
    reconnect_backoff fixed(milliseconds(1000), milliseconds(1000), 7);
    long long low = 1000;
    long long high = 0;
    for (int i = 0; i < 200; ++i) {
        const long long w = fixed.next().count();
        low = std::min(low, w);
        high = std::max(high, w);
    }
    EXPECT_LT(low, 100);
    EXPECT_GT(high, 900);
}

}  // namespace
}  // namespace tokenmeter::outbound
