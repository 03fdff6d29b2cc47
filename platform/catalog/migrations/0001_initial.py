"""Problems and hardware move here from the submissions app. Only Django's state changes: the
tables keep their names (submissions_problem, submissions_hardware), their rows, and the triggers
migration submissions 0003 put on them. Submissions 0006 removes them from that app's state."""

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("submissions", "0005_speedup_interval"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Hardware',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('slug', models.SlugField(help_text='e.g. "h200x4"; the queue is gpu.<slug>', unique=True)),
                        ('name', models.CharField(max_length=200)),
                        ('profile', models.CharField(help_text='evaluator/hardware.toml key the numbers came from', max_length=50)),
                        ('gpu_count', models.PositiveSmallIntegerField()),
                        ('bf16_tc', models.FloatField(verbose_name='bf16 tensor cores, TFLOP/s')),
                        ('fp16_tc', models.FloatField(verbose_name='fp16 tensor cores, TFLOP/s')),
                        ('fp8_tc', models.FloatField(verbose_name='fp8 tensor cores, TFLOP/s')),
                        ('tf32_tc', models.FloatField(verbose_name='tf32 tensor cores, TFLOP/s')),
                        ('fp32', models.FloatField(verbose_name='fp32 CUDA cores, TFLOP/s')),
                        ('hbm_tbps', models.FloatField(verbose_name='HBM, TB/s')),
                        ('nvlink_gbps', models.FloatField(verbose_name='NVLink per GPU one direction, GB/s')),
                        ('l2_mb', models.FloatField(verbose_name='L2, MB')),
                        ('nvls', models.BooleanField(default=False, verbose_name='NVLink multicast (NVLS) available')),
                        ('mode', models.CharField(choices=[('gpu', 'gpu'), ('shared-gpu', 'shared-gpu'), ('cpu', 'cpu')], default='gpu', max_length=12)),
                        ('active', models.BooleanField(default=True)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ],
                    options={
                        'verbose_name_plural': 'hardware',
                        'db_table': 'submissions_hardware',
                        'ordering': ('slug',),
                    },
                ),
                migrations.CreateModel(
                    name='Problem',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('slug', models.SlugField(help_text='the tasks/ folder name', max_length=100, unique=True)),
                        ('pkb_id', models.PositiveIntegerField(blank=True, help_text='ParallelKernelBench number', null=True, unique=True)),
                        ('title', models.CharField(max_length=200)),
                        ('level', models.PositiveSmallIntegerField(db_index=True)),
                        ('parallelism', models.CharField(db_index=True, max_length=20)),
                        ('origin', models.CharField(blank=True, max_length=200)),
                        ('description', models.TextField(blank=True)),
                        ('dtype', models.CharField(default='bfloat16', max_length=20)),
                        ('shapes', models.JSONField(default=list, help_text='[{"name", "dims", "default"}]')),
                        ('world_sizes', models.JSONField(default=list)),
                        ('tolerance', models.TextField(blank=True)),
                        ('bitwise', models.BooleanField(default=False)),
                        ('reference_source', models.TextField(blank=True)),
                        ('active', models.BooleanField(default=True)),
                        ('synced_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ],
                    options={
                        'db_table': 'submissions_problem',
                        'ordering': ('level', 'pkb_id', 'slug'),
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
