"""PAPI from Python (ctypes), for checking --counters before a run: is PAPI there, and
does it know each event? The runtime opens the same library with dlopen
(runtime/modules/counters.c) and checks again in every process."""

import ctypes

LIBS = (
    "libpapi.so.7.1",
    "libpapi.so.7.0",
    "libpapi.so.7",
    "libpapi.so",
    "libpapi.so.6.0",
    "libpapi.so.5",
)


def open_papi():
    """(ctypes library, None) with PAPI initialised, or (None, why)."""
    lib = None
    for name in LIBS:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        return None, "PAPI (libpapi.so) not found: install libpapi-dev"
    # PAPI_VER_CURRENT is (major << 24 | minor << 16): PAPI_library_init answers it back
    # when it is the library's own
    for major in (7, 6, 5):
        for minor in (3, 2, 1, 0):
            v = (major << 24) | (minor << 16)
            if lib.PAPI_library_init(v) == v:
                lib.PAPI_strerror.restype = ctypes.c_char_p
                return lib, None
    return None, "libpapi did not initialise (PAPI 5 to 7 expected)"


def check_events(names):
    """(known names, unknown [(name, why)], why PAPI is unusable or None)."""
    lib, why = open_papi()
    if lib is None:
        return [], [], why
    known, unknown = [], []
    for name in names:
        code = ctypes.c_int(0)
        rc = lib.PAPI_event_name_to_code(name.encode(), ctypes.byref(code))
        if rc == 0:
            known.append(name)
        else:
            msg = lib.PAPI_strerror(rc)
            unknown.append((name, msg.decode() if msg else f"PAPI error {rc}"))
    return known, unknown, None


def countable(names):
    """(counted, not counted [(name, why)]) of events PAPI knows: PAPI knows names it cannot
    count here (a preset such as PAPI_TOT_INS without hardware counters), and an event set
    holding one of them cannot start at all. Each event is tried in a probe event set with
    those kept before it (as the runtime does in each process), so one that cannot be
    counted, or not together with the others, is left out and the others kept."""
    lib, why = open_papi()
    if lib is None:
        return [], [(n, why) for n in names]
    counted, not_counted = [], []
    for name in names:
        es = ctypes.c_int(-1)
        rc = lib.PAPI_create_eventset(ctypes.byref(es))
        for n in counted + [name]:
            if rc == 0:
                rc = lib.PAPI_add_named_event(es, n.encode())
        if rc == 0:
            rc = lib.PAPI_start(es)
            if rc == 0:
                values = (ctypes.c_longlong * (len(counted) + 1))()
                lib.PAPI_stop(es, values)
        if es.value != -1:
            lib.PAPI_cleanup_eventset(es)
            lib.PAPI_destroy_eventset(ctypes.byref(es))
        if rc == 0:
            counted.append(name)
        else:
            msg = lib.PAPI_strerror(rc)
            not_counted.append((name, msg.decode() if msg else f"PAPI error {rc}"))
    return counted, not_counted
