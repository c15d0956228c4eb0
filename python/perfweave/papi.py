"""PAPI from Python (ctypes), for checking --counters before a run: is PAPI there, and
does it know each event? The runtime opens the same library with dlopen
(runtime/modules/counters.c) and checks again in every process."""
import ctypes

LIBS = ("libpapi.so.7.1", "libpapi.so.7.0", "libpapi.so.7", "libpapi.so", "libpapi.so.6.0",
        "libpapi.so.5")


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
