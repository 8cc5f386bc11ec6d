"""NVIDIA Jetson boards through sysfs (``jetson``): devfreq GPU clocks, INA3221 rails, thermal
zones, and the ``nvpmodel`` / ``jetson_clocks`` tools.

Every file is read under one root directory, ``GOVERNOR_SYSFS_ROOT`` (default ``/``), so tests
build the file trees of a Nano, a Xavier or an Orin under a temporary directory.

- :mod:`.sysfs`  the root, reads and the single write helper, the devfreq GPU node finder
- :mod:`.rails`  INA3221 power rails in the JetPack 4 (iio) and JetPack 5+ (hwmon) layouts,
  and Thor's INA238 input rail
- :mod:`.board`  which board this is (catalog name) and its L4T release
- :mod:`.tools`  ``nvpmodel`` and ``jetson_clocks``, found on PATH
- :mod:`.device` the ``jetson`` device
"""
