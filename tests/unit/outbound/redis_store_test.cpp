// outbound/redis_store against a scripted RESP server on loopback (an OS-chosen port): calls
// answered in order, and every misbehaviour of a server (a greeting, a command answered twice,
// huge headers, silence, wrong types, a refused AUTH) ends each call within the timeout with a
// failure on_error can decide, and the store goes on answering afterwards.
#include "outbound/redis_store.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "outbound/resp.hpp"

namespace tokenmeter::outbound {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
using observe::store_failure;

// The bucket script's reply to `command`: admitted at `level`, with the command's tag (its last
// argument) carried back as the script does.
std::string script_reply(const std::vector<std::string>& command,
                         const std::string& level = "42.5") {
    const std::string& tag = command.back();
    return "*3\r\n:1\r\n$" + std::to_string(level.size()) + "\r\n" + level + "\r\n$" +
           std::to_string(tag.size()) + "\r\n" + tag + "\r\n";
}

// A RESP server on 127.0.0.1 that answers each command with what `answer` returns (nothing: no
// answer) and greets each connection with `greeting`.
class scripted_server {
  public:
    using answer_fn = std::function<std::string(const std::vector<std::string>& command)>;

    explicit scripted_server(answer_fn answer, std::string greeting = "")
        : answer_(std::move(answer)), greeting_(std::move(greeting)) {
        acceptor_.open(tcp::v4());
        acceptor_.set_option(tcp::acceptor::reuse_address(true));
        acceptor_.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
        acceptor_.listen();
        accept();
        thread_ = std::thread([this] { ioc_.run(); });
    }
    ~scripted_server() {
        asio::post(ioc_, [this] {
            acceptor_.close();
            for (auto& s : sockets_) {
                boost::system::error_code ignored;
                s->close(ignored);
            }
        });
        ioc_.stop();
        thread_.join();
    }
    scripted_server(const scripted_server&) = delete;
    scripted_server& operator=(const scripted_server&) = delete;

    [[nodiscard]] std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
    [[nodiscard]] int connections() const { return connections_.load(); }
    [[nodiscard]] std::vector<std::vector<std::string>> commands() const {
        std::lock_guard lock(mutex_);
        return commands_;
    }
    [[nodiscard]] int count(const std::string& name) const {
        int n = 0;
        for (const auto& c : commands()) {
            n += !c.empty() && c[0] == name ? 1 : 0;
        }
        return n;
    }

  private:
    struct session {
        std::shared_ptr<tcp::socket> socket;
        resp::parser parser{resp::limits{1 << 20, 64, 2}};
        std::array<char, 4096> buffer{};
    };

    void accept() {
        acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket s) {
            if (ec) {
                return;
            }
            ++connections_;
            auto sess = std::make_shared<session>();
            sess->socket = std::make_shared<tcp::socket>(std::move(s));
            sess->socket->set_option(tcp::no_delay(true));
            sockets_.push_back(sess->socket);
            if (!greeting_.empty()) {
                send(sess, greeting_);
            }
            read(sess);
            accept();
        });
    }
    void send(const std::shared_ptr<session>& sess, std::string bytes) {
        auto data = std::make_shared<std::string>(std::move(bytes));
        asio::async_write(*sess->socket, asio::buffer(*data),
                          [data, sess](const boost::system::error_code&, std::size_t) {});
    }
    void read(const std::shared_ptr<session>& sess) {
        sess->socket->async_read_some(
            asio::buffer(sess->buffer),
            [this, sess](const boost::system::error_code& ec, std::size_t n) {
                if (ec) {
                    return;
                }
                std::string_view bytes(sess->buffer.data(), n);
                std::string out;
                while (!bytes.empty()) {
                    bytes.remove_prefix(sess->parser.feed(bytes));
                    if (!sess->parser.has_reply()) {
                        break;
                    }
                    std::vector<std::string> command;
                    for (auto& m : sess->parser.take_reply().members) {
                        command.push_back(m.text);
                    }
                    {
                        std::lock_guard lock(mutex_);
                        commands_.push_back(command);
                    }
                    out += answer_(command);
                }
                if (!out.empty()) {
                    send(sess, std::move(out));
                }
                read(sess);
            });
    }

    answer_fn answer_;
    std::string greeting_;
    asio::io_context ioc_;
    tcp::acceptor acceptor_{ioc_};
    std::vector<std::shared_ptr<tcp::socket>> sockets_;
    std::atomic<int> connections_{0};
    mutable std::mutex mutex_;
    std::vector<std::vector<std::string>> commands_;
    std::thread thread_;
};

// A Redis that knows the script once EVAL loaded it, and answers PING and AUTH.
std::string good_redis(const std::vector<std::string>& c, std::atomic<bool>& loaded) {
    if (c[0] == "PING") {
        return "$" + std::to_string(c[1].size()) + "\r\n" + c[1] + "\r\n";
    }
    if (c[0] == "AUTH") {
        return "+OK\r\n";
    }
    if (c[0] == "EVALSHA" && !loaded) {
        return "-NOSCRIPT No matching script. Please use EVAL.\r\n";
    }
    loaded = true;
    return script_reply(c);
}

redis_settings settings_for(const scripted_server& server) {
    redis_settings s;
    s.port = server.port();
    s.timeout = 300ms;
    s.connections = 1;
    s.reconnect_initial = 20ms;
    s.reconnect_max = 200ms;
    s.connect_timeout = 1s;
    return s;
}

observe::store_reply call(redis_store& store, const std::string& key = "tm:{t}:tokens") {
    observe::shared_call c;
    c.key = key;
    c.rate = 10;
    c.capacity = 10;
    c.cost = 1;
    c.admit = true;
    auto answered = std::make_shared<std::promise<observe::store_reply>>();
    auto future = answered->get_future();
    const auto start = std::chrono::steady_clock::now();
    store.call(c, [answered](const observe::store_reply& r) { answered->set_value(r); });
    EXPECT_EQ(future.wait_for(3s), std::future_status::ready) << "every call is answered";
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "within the timeout";
    return future.get();
}

// Calls until one is answered by the script (the connection may still be coming up).
observe::store_reply call_until_answered(redis_store& store) {
    observe::store_reply r;
    for (int i = 0; i < 100; ++i) {
        r = call(store);
        if (r.failure == store_failure::none) {
            return r;
        }
        std::this_thread::sleep_for(20ms);
    }
    return r;
}

// Everything the proxy logs while it lives, for the tests that read the log.
class captured_log {
  public:
    captured_log() : previous_(spdlog::default_logger()) {
        auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
        auto logger = std::make_shared<spdlog::logger>("test", sink);
        logger->set_level(spdlog::level::debug);
        spdlog::set_default_logger(logger);
    }
    ~captured_log() { spdlog::set_default_logger(previous_); }
    captured_log(const captured_log&) = delete;
    captured_log& operator=(const captured_log&) = delete;
    std::string text() {
        spdlog::default_logger()->flush();
        return out_.str();
    }

  private:
    std::ostringstream out_;
    std::shared_ptr<spdlog::logger> previous_;
};

TEST(RedisStore, AnswersAndLoadsTheScriptOnNoscript) {
    std::atomic<bool> loaded{false};
    scripted_server server([&](const auto& c) { return good_redis(c, loaded); });
    redis_store store(settings_for(server));
    store.start();
    const observe::store_reply r = call_until_answered(store);
    EXPECT_EQ(r.failure, store_failure::none);
    EXPECT_TRUE(r.admitted);
    EXPECT_DOUBLE_EQ(r.level, 42.5);
    EXPECT_EQ(server.count("EVAL"), 1);
    EXPECT_EQ(call(store).failure, store_failure::none);
    EXPECT_EQ(server.count("EVAL"), 1) << "EVALSHA from then on";
    EXPECT_EQ(server.connections(), 1);
    EXPECT_EQ(server.count("AUTH"), 0) << "no password, no AUTH";
}

// `count` calls at once, on keys k0, k1, ...: pipelined on the store's connection.
std::vector<std::future<observe::store_reply>> send_keyed(redis_store& store, int count) {
    std::vector<std::future<observe::store_reply>> futures;
    for (int i = 0; i < count; ++i) {
        observe::shared_call c;
        c.key = "k" + std::to_string(i);
        auto p = std::make_shared<std::promise<observe::store_reply>>();
        futures.push_back(p->get_future());
        store.call(c, [p](const observe::store_reply& r) { p->set_value(r); });
    }
    return futures;
}

TEST(RedisStore, PipelinedCallsAreMatchedInOrder) {
    // Each key's reply carries its own level, so a reply given to the wrong call shows.
    scripted_server server([](const std::vector<std::string>& c) -> std::string {
        if (c[0] == "PING") {
            return "$" + std::to_string(c[1].size()) + "\r\n" + c[1] + "\r\n";
        }
        return script_reply(c, c[3].starts_with("k") ? c[3].substr(1) : "0");
    });
    redis_store store(settings_for(server));
    store.start();
    ASSERT_EQ(call_until_answered(store).failure, store_failure::none);
    auto futures = send_keyed(store, 200);
    for (int i = 0; i < 200; ++i) {
        ASSERT_EQ(futures[i].wait_for(3s), std::future_status::ready);
        const auto r = futures[i].get();
        ASSERT_EQ(r.failure, store_failure::none) << i;
        EXPECT_DOUBLE_EQ(r.level, i) << "call " << i << " got another call's reply";
    }
}

TEST(RedisStore, AGreetingOnConnectIsNeverTakenForAnAnswer) {
    std::atomic<bool> loaded{true};
    scripted_server server([&](const auto& c) { return good_redis(c, loaded); }, "+OK\r\n");
    captured_log log;
    redis_store store(settings_for(server));
    store.start();
    std::this_thread::sleep_for(300ms);
    for (int i = 0; i < 5; ++i) {
        EXPECT_EQ(call(store).failure, store_failure::connection);
    }
    EXPECT_EQ(server.count("EVALSHA"), 0) << "no call is sent on a connection out of step";
    EXPECT_GE(server.connections(), 2) << "it reconnects";
    EXPECT_NE(log.text().find("out of step"), std::string::npos) << log.text();
}

TEST(RedisStore, ACommandAnsweredTwiceClosesTheConnection) {
    std::atomic<bool> loaded{true};
    scripted_server server([&](const std::vector<std::string>& c) {
        const std::string once = good_redis(c, loaded);
        return c[0] == "EVALSHA" ? once + once : once;
    });
    redis_store store(settings_for(server));
    store.start();
    EXPECT_EQ(call_until_answered(store).failure, store_failure::none);
    std::this_thread::sleep_for(100ms);
    EXPECT_GE(server.connections(), 2) << "the extra reply closed the connection; it came back";
    EXPECT_EQ(call_until_answered(store).failure, store_failure::none);
}

TEST(RedisStore, APipelinedCallNeverTakesTheReplyOfTheCallBeforeIt) {
    // The second call is answered twice, the rest once: without the tag, each call after it
    // would take the reply meant for the one before it. The double answer is held back until the
    // next call has arrived, so a call is waiting when the extra reply comes.
    std::atomic<int> calls_answered{0};
    std::string held;  // the server's thread only
    scripted_server server([&](const std::vector<std::string>& c) -> std::string {
        if (c[0] == "PING") {
            return "$" + std::to_string(c[1].size()) + "\r\n" + c[1] + "\r\n";
        }
        const std::string once = script_reply(c, c[3].starts_with("k") ? c[3].substr(1) : "0");
        if (++calls_answered == 2) {
            held = once + once;
            return {};
        }
        return std::exchange(held, {}) + once;
    });
    captured_log log;
    redis_store store(settings_for(server));
    store.start();
    ASSERT_EQ(call_until_answered(store).failure, store_failure::none);
    auto futures = send_keyed(store, 20);
    int answered = 0;
    for (int i = 0; i < 20; ++i) {
        ASSERT_EQ(futures[i].wait_for(3s), std::future_status::ready);
        const auto r = futures[i].get();
        if (r.failure == store_failure::none) {
            ++answered;
            EXPECT_DOUBLE_EQ(r.level, i) << "call " << i << " got another call's reply";
        }
    }
    EXPECT_GE(answered, 1) << "the call answered twice was answered";
    EXPECT_LT(answered, 20) << "the calls behind the duplicate were failed, not answered late";
    EXPECT_NE(log.text().find("another call's tag"), std::string::npos) << log.text();
    EXPECT_EQ(call_until_answered(store).failure, store_failure::none);
    EXPECT_GE(server.connections(), 2) << "the connection out of step was replaced";
}

redis_settings with_timeout(redis_settings s, std::chrono::milliseconds timeout) {
    s.timeout = timeout;
    return s;
}

// A Redis that answers EVALSHA with `odd_answer` (nothing: silence) while `odd` is set, and a
// store on it, up and answering.
struct odd_redis {
    explicit odd_redis(std::string answer, std::chrono::milliseconds timeout = 300ms)
        : odd_answer(std::move(answer)),
          server([this](const std::vector<std::string>& c) {
              return c[0] == "EVALSHA" && odd ? odd_answer : good_redis(c, loaded);
          }),
          store(with_timeout(settings_for(server), timeout)) {
        store.start();
        EXPECT_EQ(call_until_answered(store).failure, store_failure::none);
    }

    std::string odd_answer;
    std::atomic<bool> loaded{true};
    std::atomic<bool> odd{false};
    scripted_server server;
    redis_store store;
};

TEST(RedisStore, HugeHeadersCloseTheConnectionAtOnce) {
    for (const std::string& huge :
         {std::string("*20000000\r\n"), std::string("$2000000000\r\n"),
          std::string("*2\r\n*2\r\n*2\r\n*2\r\n*2\r\n*2\r\n*2\r\n*2\r\n*2\r\n")}) {
        odd_redis redis(huge);
        redis.odd = true;
        const auto start = std::chrono::steady_clock::now();
        EXPECT_EQ(call(redis.store).failure, store_failure::connection) << huge;
        EXPECT_LT(std::chrono::steady_clock::now() - start, 250ms)
            << "refused on the header, not after the timeout";
        redis.odd = false;
        EXPECT_EQ(call_until_answered(redis.store).failure, store_failure::none);
        EXPECT_GE(redis.server.connections(), 2);
    }
}

TEST(RedisStore, ASilentServerTimesOutAndTheConnectionIsReplaced) {
    odd_redis redis("");
    redis.odd = true;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(call(redis.store).failure, store_failure::timeout);
    EXPECT_GE(std::chrono::steady_clock::now() - start, 290ms);
    redis.odd = false;
    EXPECT_EQ(call_until_answered(redis.store).failure, store_failure::none);
    EXPECT_EQ(redis.server.connections(), 2) << "the timed-out connection was closed and replaced";
}

TEST(RedisStore, WrongReplyTypesFailTheCallNotTheConnection) {
    for (const std::string& wrong :
         {std::string(":1\r\n"), std::string("+OK\r\n"), std::string("$-1\r\n"),
          std::string("*1\r\n:1\r\n"), std::string("*2\r\n:1\r\n$4\r\n42.5\r\n"),
          std::string("-ERR something else\r\n")}) {
        odd_redis redis(wrong);
        redis.odd = true;
        const auto failure = call(redis.store).failure;
        EXPECT_TRUE(failure == store_failure::reply || failure == store_failure::script) << wrong;
        redis.odd = false;
        EXPECT_EQ(call(redis.store).failure, store_failure::none) << wrong;
        EXPECT_EQ(redis.server.connections(), 1) << wrong;
    }
}

TEST(RedisStore, ARefusedAuthIsLoggedByItsCodeOnlyAndRetriedWithBackoff) {
    const std::string password = "hunter2-secret";
    scripted_server server([&](const std::vector<std::string>& c) -> std::string {
        if (c[0] == "AUTH") {
            // A server that echoes what it was sent.
            return "-WRONGPASS invalid username-password pair: " + c.back() + "\r\n";
        }
        return "-NOAUTH Authentication required.\r\n";
    });
    captured_log log;
    redis_settings s = settings_for(server);
    s.username = "meter";
    s.password = password;
    s.reconnect_initial = 50ms;
    s.reconnect_max = 10s;
    s.connections = 2;
    redis_store store(s);
    store.start();
    std::this_thread::sleep_for(1500ms);
    EXPECT_EQ(call(store).failure, store_failure::connection);
    store.stop();
    const auto commands = server.commands();
    ASSERT_FALSE(commands.empty());
    EXPECT_EQ(commands[0], (std::vector<std::string>{"AUTH", "meter", password}));
    // 50 ms doubling, drawn under the ceiling: about 5 attempts per connection in 1.5 s, never
    // the tight loop of a backoff that starts over on every TCP connect.
    const int attempts = server.count("AUTH");
    EXPECT_GE(attempts, 2);
    EXPECT_LE(attempts, 24) << attempts;
    EXPECT_EQ(server.count("EVALSHA"), 0);
    const std::string text = log.text();
    EXPECT_NE(text.find("refused AUTH (WRONGPASS)"), std::string::npos) << text;
    EXPECT_EQ(text.find(password), std::string::npos) << text;
    EXPECT_EQ(text.find("invalid username-password"), std::string::npos) << text;
}

TEST(RedisStore, ARefusedConnectionFailsAtOnceAndStopAnswersPendingCalls) {
    asio::io_context ioc;
    tcp::acceptor probe(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    redis_settings s;
    s.port = probe.local_endpoint().port();
    probe.close();  // nothing listens there now
    s.timeout = 300ms;
    redis_store store(s);
    store.start();
    EXPECT_EQ(call(store).failure, store_failure::connection);

    odd_redis redis("", 5s);
    redis.odd = true;
    auto p = std::make_shared<std::promise<observe::store_reply>>();
    auto f = p->get_future();
    redis.store.call(observe::shared_call{},
                     [p](const observe::store_reply& r) { p->set_value(r); });
    std::this_thread::sleep_for(100ms);
    redis.store.stop();
    ASSERT_EQ(f.wait_for(1s), std::future_status::ready);
    EXPECT_EQ(f.get().failure, store_failure::connection);
}

}  // namespace
}  // namespace tokenmeter::outbound
