"""The rollup tables now belong to relay.levels (relay migration 0022): the HUD forgets them in
Django's state only; the tables stay."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('hud', '0002_h24roll_excused_rollups'),
        ('relay', '0022_i43_rollups_moved'),
    ]

    state_operations = [
        migrations.DeleteModel(
            name='ExcusedRollup',
        ),
        migrations.DeleteModel(
            name='RollupState',
        ),
        migrations.DeleteModel(
            name='TallyRollup',
        ),
    ]
    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations)]
