/* The password-check pool (server/app/passcheck.c) from several threads at once, as the
 * workers use it: every check answers right for bcrypt, SHA-crypt and yescrypt hashes
 * libcrypt itself made; checks let go of while queued or running are freed once, by
 * whichever side lets go last (ASan and TSan builds watch); past the queue's bound a
 * check is refused at once, never queued. */
#define _GNU_SOURCE
#include <crypt.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "app/passcheck.h"
#include "check.h"

struct kind {
    const char *prefix;
    unsigned long cost;
    char hash[CRYPT_OUTPUT_SIZE];
};
static struct kind kinds[] = { { "$2y$", 4, "" }, { "$5$", 1000, "" }, { "$6$", 1000, "" }, { "$y$", 0, "" } };
static size_t nkinds;

static int wait_result(struct passcheck *k)
{
    struct pollfd p = { passcheck_fd(k), POLLIN, 0 };
    if (poll(&p, 1, 20000) != 1)
        return -2;
    return passcheck_result(k);
}

static _Atomic int wrong_answers, timeouts;

static void *client(void *arg)
{
    unsigned id = (unsigned)(size_t)arg;
    for (unsigned i = 0; i < 40; i++) {
        const struct kind *kd = &kinds[(id + i) % nkinds];
        bool right = (i % 3) == 0;
        const char *pw = right ? "correct horse" : "battery staple";
        struct passcheck *k = passcheck_start(kd->hash, pw, strlen(pw));
        if (!k)
            continue;              /* the queue was full: refused, which is allowed */
        if (i % 5 == 4) {
            passcheck_release(k);  /* the client went away: the pool frees it */
            continue;
        }
        int r = wait_result(k);
        if (r == -2)
            timeouts++;
        else if (r != (right ? PASSCHECK_YES : PASSCHECK_NO))
            wrong_answers++;
        passcheck_release(k);
    }
    return NULL;
}

static void make_hashes(void)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        char setting[CRYPT_GENSALT_OUTPUT_SIZE];
        struct crypt_data cd;
        memset(&cd, 0, sizeof cd);
        if (!crypt_gensalt_rn(kinds[i].prefix, kinds[i].cost, NULL, 0, setting, sizeof setting))
            continue;              /* (a libcrypt without it) */
        const char *h = crypt_rn("correct horse", setting, &cd, sizeof cd);
        if (!h || h[0] == '*')
            continue;
        kinds[nkinds] = kinds[i];
        snprintf(kinds[nkinds].hash, sizeof kinds[nkinds].hash, "%s", h);
        nkinds++;
    }
    CHECKF(nkinds >= 3, "libcrypt made %zu kinds of hash", nkinds);
}

static void answers(void)
{
    for (size_t i = 0; i < nkinds; i++) {
        struct passcheck *k = passcheck_start(kinds[i].hash, "correct horse", 13);
        int r = k ? wait_result(k) : -3;
        passcheck_release(k);
        CHECKF(r == PASSCHECK_YES, "%s: the right password gave %d", kinds[i].prefix, r);
        k = passcheck_start(kinds[i].hash, "correct horsf", 13);
        r = k ? wait_result(k) : -3;
        passcheck_release(k);
        CHECKF(r == PASSCHECK_NO, "%s: a wrong password gave %d", kinds[i].prefix, r);
    }
    struct passcheck *k = passcheck_start("*0", "x", 1);
    int r = k ? wait_result(k) : -3;
    passcheck_release(k);
    CHECKF(r == PASSCHECK_NO, "a hash libcrypt refuses gave %d", r);
}

static void threads_at_once(void)
{
    pthread_t t[6];
    for (size_t i = 0; i < 6; i++)
        pthread_create(&t[i], NULL, client, (void *)i);
    for (size_t i = 0; i < 6; i++)
        pthread_join(t[i], NULL);
    CHECKF(wrong_answers == 0 && timeouts == 0, "%d wrong answers, %d never answered", wrong_answers, timeouts);
}

/* More checks than the queue holds, none waited for: the rest refused at once, and the
 * abandoned ones drain. */
static void bounded_queue(void)
{
    char setting[CRYPT_GENSALT_OUTPUT_SIZE], slow[CRYPT_OUTPUT_SIZE];
    struct crypt_data cd;
    memset(&cd, 0, sizeof cd);
    crypt_gensalt_rn("$2y$", 8, NULL, 0, setting, sizeof setting);
    snprintf(slow, sizeof slow, "%s", crypt_rn("pw", setting, &cd, sizeof cd));
    static struct passcheck *all[400];
    unsigned taken = 0, refused = 0;
    for (int i = 0; i < 400; i++)
        (all[i] = passcheck_start(slow, "wrong", 5)) ? taken++ : refused++;
    unsigned queued = passcheck_queued();
    for (int i = 0; i < 400; i++)
        passcheck_release(all[i]);
    CHECKF(refused > 0 && taken >= 128, "400 checks at once: %u queued, %u refused", taken, refused);
    CHECKF(queued <= 128, "the queue held %u", queued);
    for (int i = 0; i < 400 && passcheck_queued(); i++)
        usleep(50000);
    CHECKF(passcheck_queued() == 0, "%u abandoned checks left", passcheck_queued());
}

int main(void)
{
    RUN(make_hashes);
    RUN(answers);
    RUN(threads_at_once);
    RUN(bounded_queue);
    CHECK_DONE();
}
