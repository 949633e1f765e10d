/* h2raw: a deliberately broken HTTP/2 peer for the bad-input tests.  It connects to
 * 127.0.0.1:PORT, sends the bytes of one SCENARIO, reads whatever comes back for up to
 * MS milliseconds (or until the daemon closes), and prints one line per frame it
 * receives ("SETTINGS flags=0 stream=0", "GOAWAY last=0 error=1", "HEADERS ... status=431"),
 * or the first line of an HTTP/1.1 answer, then "CLOSED" if the daemon closed.
 *
 * Scenarios: garbage (a TLS ClientHello on the cleartext port), badping (PING of length
 * 7), decreasing (stream 5 then stream 3), emptypath (:path ""), rapidreset (300
 * streams opened and reset at once), bigheaders (80 KB of header fields, ignoring
 * SETTINGS_MAX_HEADER_LIST_SIZE), idle (the preface, then silence), vanish (a request
 * whose body never comes). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *const names[] = { "DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS", "PUSH_PROMISE",
                                     "PING", "GOAWAY", "WINDOW_UPDATE", "CONTINUATION" };

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static unsigned char out[1 << 20], in[1 << 20];
static size_t outlen;

static void put(const void *p, size_t n)
{
    memcpy(out + outlen, p, n);
    outlen += n;
}

static void frame(unsigned type, unsigned flags, unsigned stream, const void *payload, size_t len)
{
    unsigned char h[9] = { (unsigned char)(len >> 16), (unsigned char)(len >> 8), (unsigned char)len,
                           (unsigned char)type, (unsigned char)flags, (unsigned char)(stream >> 24),
                           (unsigned char)(stream >> 16), (unsigned char)(stream >> 8), (unsigned char)stream };
    put(h, 9);
    put(payload, len);
}

/* GET http / with :authority localhost */
static const unsigned char get_root[] = { 0x82, 0x86, 0x84, 0x41, 0x09, 'l', 'o', 'c', 'a', 'l', 'h', 'o', 's', 't' };

static void preface(void)
{
    put("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
    frame(4, 0, 0, "", 0);
}

static int build(const char *scenario)
{
    if (!strcmp(scenario, "garbage")) {
        static const unsigned char hello[] = { 0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
                                               'n', 'o', 't', ' ', 'h', 't', 't', 'p', '/', '2', 0, 0, 0, 0, 0 };
        put(hello, sizeof hello);
    } else if (!strcmp(scenario, "badping")) {
        preface();
        frame(6, 0, 0, "abcdefg", 7);
    } else if (!strcmp(scenario, "decreasing")) {
        preface();
        frame(1, 5, 5, get_root, sizeof get_root);
        frame(1, 5, 3, get_root, sizeof get_root);
    } else if (!strcmp(scenario, "emptypath")) {
        static const unsigned char empty_path[] = { 0x82, 0x86, 0x04, 0x00 };
        preface();
        frame(1, 5, 1, empty_path, sizeof empty_path);
    } else if (!strcmp(scenario, "rapidreset")) {
        preface();
        for (unsigned id = 1; id < 600; id += 2) {
            static const unsigned char cancel[] = { 0, 0, 0, 8 };
            frame(1, 4, id, get_root, sizeof get_root);
            frame(3, 0, id, cancel, 4);
        }
    } else if (!strcmp(scenario, "bigheaders")) {
        /* Four 20000-byte fields: each within HPACK's limits, 80 KB together. */
        static unsigned char block[90000];
        size_t n = sizeof get_root, value = 20000;
        memcpy(block, get_root, n);
        for (int k = 0; k < 4; k++) {
            block[n++] = 0x00;                   /* literal, new name, not indexed */
            block[n++] = 3;
            block[n++] = 'x', block[n++] = '-', block[n++] = (unsigned char)('0' + k);
            block[n++] = 0x7f;                   /* value length: 127 + varint */
            for (size_t v = value - 127;; v >>= 7) {
                block[n++] = (unsigned char)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
                if (v < 0x80)
                    break;
            }
            memset(block + n, 'a', value);
            n += value;
        }
        preface();
        for (size_t off = 0, first = 1; off < n; first = 0) {
            size_t len = n - off > 16384 ? 16384 : n - off;
            unsigned flags = (off + len == n ? 4 : 0) | (first ? 1 : 0);
            frame(first ? 1 : 9, flags, 1, block + off, len);
            off += len;
        }
    } else if (!strcmp(scenario, "idle")) {
        preface();                               /* then says nothing more */
    } else if (!strcmp(scenario, "vanish")) {
        preface();
        static const unsigned char post_echo[] = { 0x83, 0x86, 0x44, 0x07, '/', '-', '/', 'e', 'c', 'h', 'o',
                                                   0x41, 0x09, 'l', 'o', 'c', 'a', 'l', 'h', 'o', 's', 't' };
        frame(1, 4, 1, post_echo, sizeof post_echo);
        frame(0, 0, 1, "partial body", 12);
    } else {
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3 || build(argv[2])) {
        fprintf(stderr, "usage: h2raw PORT garbage|badping|decreasing|emptypath|rapidreset|bigheaders|idle|vanish [MS]\n");
        return 2;
    }
    int ms = argc > 3 ? atoi(argv[3]) : 2000;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
        perror("connect");
        return 2;
    }
    for (size_t off = 0; off < outlen;) {
        ssize_t n = write(fd, out + off, outlen - off);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    size_t inlen = 0;
    int closed = 0;
    long deadline = now_ms() + ms;
    while (inlen < sizeof in) {
        long left = deadline - now_ms();
        if (left <= 0)
            break;
        struct pollfd p = { fd, POLLIN, 0 };
        if (poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t n = read(fd, in + inlen, sizeof in - inlen);
        if (n <= 0) {
            closed = 1;
            break;
        }
        inlen += (size_t)n;
    }
    if (inlen >= 8 && !memcmp(in, "HTTP/1.", 7)) {
        unsigned char *eol = memchr(in, '\r', inlen);
        printf("%.*s\n", (int)(eol ? eol - in : (long)inlen), in);
    } else {
        for (size_t off = 0; off + 9 <= inlen;) {
            unsigned len = (unsigned)in[off] << 16 | (unsigned)in[off + 1] << 8 | in[off + 2];
            unsigned type = in[off + 3], flags = in[off + 4];
            unsigned stream = ((unsigned)in[off + 5] << 24 | (unsigned)in[off + 6] << 16 | (unsigned)in[off + 7] << 8 | in[off + 8]) & 0x7fffffff;
            const unsigned char *pl = in + off + 9;
            if (off + 9 + len > inlen)
                break;
            if (type == 7 && len >= 8)
                printf("GOAWAY last=%u error=%u\n", ((unsigned)pl[0] << 24 | (unsigned)pl[1] << 16 | (unsigned)pl[2] << 8 | pl[3]) & 0x7fffffff,
                       (unsigned)pl[4] << 24 | (unsigned)pl[5] << 16 | (unsigned)pl[6] << 8 | pl[7]);
            else if (type == 1 && len >= 5 && pl[0] == 0x48 && pl[1] == 3)   /* :status, literal */
                printf("HEADERS flags=%u stream=%u status=%.3s\n", flags, stream, (const char *)pl + 2);
            else if (type == 1 && len >= 1 && pl[0] >= 0x88 && pl[0] <= 0x8e) {
                static const char *const st[] = { "200", "204", "206", "304", "400", "404", "500" };
                printf("HEADERS flags=%u stream=%u status=%s\n", flags, stream, st[pl[0] - 0x88]);
            } else if (type == 3 && len == 4)
                printf("RST_STREAM stream=%u error=%u\n", stream, (unsigned)pl[0] << 24 | (unsigned)pl[1] << 16 | (unsigned)pl[2] << 8 | pl[3]);
            else
                printf("%s flags=%u stream=%u\n", type < 10 ? names[type] : "UNKNOWN", flags, stream);
            off += 9 + len;
        }
    }
    if (closed)
        printf("CLOSED\n");
    return 0;
}
