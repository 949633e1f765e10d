/* Password checks off the event loop: a small pool of threads that run crypt_rn
 * (libxcrypt) for the handlers, which wait parked meanwhile.
 *
 * bcrypt at cost 10 takes about 50 ms and SHA-crypt's 5,000 rounds a few: done on a
 * worker it would stall every connection of that worker for as long.  A handler instead
 * queues a check here and waits on the check's eventfd (req_wait_fd), holding no stack:
 * the thread that runs the check writes the eventfd when the answer is in.
 *
 * Invariants:
 *   - a check is heap memory shared by its handler and one pool thread, and freed by
 *     whichever of the two lets go last (refs): a handler whose client went away lets go
 *     of a check still queued or running, and the thread frees it when done;
 *   - the password is copied into the check and wiped (explicit_bzero) as soon as crypt
 *     has read it, also when the check is abandoned;
 *   - the queue is bounded (PASSCHECK_QUEUE_MAX waiting): past it passcheck_start says
 *     no at once, and the caller refuses the request (503) rather than letting a flood of
 *     wrong passwords queue up minutes of bcrypt in front of everyone else;
 *   - the threads are started on the first check (a daemon without auth_basic has none),
 *     one per CPU, and run at a lower priority than the workers (nice + 10), so a flood
 *     of checks takes the CPU the event loops leave.
 * The comparison of crypt's answer with the stored hash is CRYPTO_memcmp over the whole
 * length: its time says nothing of how much of a guess was right. */
#define _GNU_SOURCE
#include <crypt.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "app/passcheck.h"
#include "scalloc.h"

#define PASSCHECK_QUEUE_MAX 128
#define PASSCHECK_THREADS_MAX 16
#define PASSCHECK_STACK (256u << 10)   /* yescrypt's memory is heap; its frames are small */

struct passcheck {
    struct passcheck *next;        /* in the queue */
    _Atomic int refs;              /* the handler's and the pool's */
    _Atomic int result;            /* PASSCHECK_PENDING until the thread is done */
    int fd;                        /* eventfd: written once the result is in */
    char *hash;                    /* the stored crypt(3) string */
    char *password;                /* NUL-terminated; wiped once crypt has read it */
    size_t password_len;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;
static struct passcheck *head, *tail;
static unsigned queued;
static unsigned nthreads;

static void drop(struct passcheck *k)
{
    if (atomic_fetch_sub_explicit(&k->refs, 1, memory_order_acq_rel) != 1)
        return;
    explicit_bzero(k->password, k->password_len);
    close(k->fd);
    sc_free(k);
}

static void *pool_main(void *arg)
{
    (void)arg;
    /* Behind the event loops: a check can wait a little, a connection should not. */
    setpriority(PRIO_PROCESS, (id_t)gettid(), 10);
    struct crypt_data *cd = sc_calloc(1, sizeof *cd);
    for (;;) {
        pthread_mutex_lock(&lock);
        while (!head)
            pthread_cond_wait(&work, &lock);
        struct passcheck *k = head;
        head = k->next;
        if (!head)
            tail = NULL;
        queued--;
        pthread_mutex_unlock(&lock);
        int result = PASSCHECK_NO;
        /* A check its handler let go of is not worth the CPU. */
        if (atomic_load_explicit(&k->refs, memory_order_acquire) > 1 && cd) {
            const char *out = crypt_rn(k->password, k->hash, cd, sizeof *cd);
            size_t hl = strlen(k->hash);
            if (out && out[0] != '*' && strlen(out) == hl && CRYPTO_memcmp(out, k->hash, hl) == 0)
                result = PASSCHECK_YES;
            explicit_bzero(cd, sizeof *cd);
        }
        explicit_bzero(k->password, k->password_len);
        atomic_store_explicit(&k->result, result, memory_order_release);
        uint64_t one = 1;
        while (write(k->fd, &one, sizeof one) < 0 && errno == EINTR)
            ;
        drop(k);
    }
    return NULL;
}

/* The threads, once: one per CPU (at most PASSCHECK_THREADS_MAX).  Called with lock held. */
static int start_pool(void)
{
    if (nthreads)
        return 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned want = cpus < 1 ? 1 : cpus > PASSCHECK_THREADS_MAX ? PASSCHECK_THREADS_MAX : (unsigned)cpus;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, PASSCHECK_STACK);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (unsigned i = 0; i < want; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, pool_main, NULL))
            break;
        nthreads++;
    }
    pthread_attr_destroy(&attr);
    return nthreads ? 0 : -1;
}

struct passcheck *passcheck_start(const char *hash, const char *password, size_t len)
{
    size_t hl = strlen(hash);
    struct passcheck *k = sc_malloc(sizeof *k + hl + 1 + len + 1);
    if (!k)
        return NULL;
    k->next = NULL;
    atomic_init(&k->refs, 2);
    atomic_init(&k->result, PASSCHECK_PENDING);
    k->hash = (char *)(k + 1);
    memcpy(k->hash, hash, hl + 1);
    k->password = k->hash + hl + 1;
    memcpy(k->password, password, len);
    k->password[len] = 0;
    k->password_len = len;
    k->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (k->fd < 0) {
        explicit_bzero(k->password, len);
        sc_free(k);
        return NULL;
    }
    pthread_mutex_lock(&lock);
    if (queued >= PASSCHECK_QUEUE_MAX || start_pool()) {
        pthread_mutex_unlock(&lock);
        atomic_store(&k->refs, 1);
        drop(k);
        return NULL;
    }
    if (tail)
        tail->next = k;
    else
        head = k;
    tail = k;
    queued++;
    pthread_cond_signal(&work);
    pthread_mutex_unlock(&lock);
    return k;
}

int passcheck_fd(const struct passcheck *k) { return k->fd; }

int passcheck_result(const struct passcheck *k) { return atomic_load_explicit(&k->result, memory_order_acquire); }

void passcheck_release(struct passcheck *k)
{
    if (k)
        drop(k);
}

unsigned passcheck_queued(void)
{
    pthread_mutex_lock(&lock);
    unsigned n = queued;
    pthread_mutex_unlock(&lock);
    return n;
}
